/** CSS named colours (CSS Color Module Level 4), plus transparent. */
const NAMED_COLORS = new Set(
  (
    "aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue blueviolet brown " +
    "burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk crimson cyan darkblue darkcyan " +
    "darkgoldenrod darkgray darkgreen darkgrey darkkhaki darkmagenta darkolivegreen darkorange darkorchid darkred " +
    "darksalmon darkseagreen darkslateblue darkslategray darkslategrey darkturquoise darkviolet deeppink " +
    "deepskyblue dimgray dimgrey dodgerblue firebrick floralwhite forestgreen fuchsia gainsboro ghostwhite gold " +
    "goldenrod gray green greenyellow grey honeydew hotpink indianred indigo ivory khaki lavender lavenderblush " +
    "lawngreen lemonchiffon lightblue lightcoral lightcyan lightgoldenrodyellow lightgray lightgreen lightgrey " +
    "lightpink lightsalmon lightseagreen lightskyblue lightslategray lightslategrey lightsteelblue lightyellow lime " +
    "limegreen linen magenta maroon mediumaquamarine mediumblue mediumorchid mediumpurple mediumseagreen " +
    "mediumslateblue mediumspringgreen mediumturquoise mediumvioletred midnightblue mintcream mistyrose moccasin " +
    "navajowhite navy oldlace olive olivedrab orange orangered orchid palegoldenrod palegreen paleturquoise " +
    "palevioletred papayawhip peachpuff peru pink plum powderblue purple rebeccapurple red rosybrown royalblue " +
    "saddlebrown salmon sandybrown seagreen seashell sienna silver skyblue slateblue slategray slategrey snow " +
    "springgreen steelblue tan teal thistle tomato turquoise violet wheat white whitesmoke yellow yellowgreen " +
    "transparent"
  ).split(" "),
);

const HEX = /^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i;
// A CSS <number>: digits, or digits on both sides of a point, or a point and digits ("1." is not
// one). Unambiguous, so the patterns below never backtrack far.
const NUMBER = String.raw`[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?`;
/** CSS whitespace (CSS Syntax §4.2): not the Unicode spaces JavaScript's \s also matches. */
const WS = String.raw`[ \t\n\r\f]`;
/** Longer than any colour written sensibly ("hsla(359.5deg, 100%, 100%, 0.25)" is 33). */
const MAX_LENGTH = 100;
const PERCENT = `${NUMBER}%`;
/** <hue>: a number (degrees) or an angle. */
const HUE = `${NUMBER}(?:deg|grad|rad|turn)?`;
const ALPHA = `${NUMBER}%?`;
const COMMA = `${WS}*,${WS}*`;
const functional = (body: string) => new RegExp(`^${body}$`, "i");
/**
 * rgb()/rgba()/hsl()/hsla() as CSS Color 4 writes them (§5.1, §7.1): the legacy form with commas
 * (rgb: three numbers or three percentages; hsl: a hue and two percentages; an optional alpha)
 * and the modern form with spaces (numbers, percentages or `none` in any mix, alpha after "/").
 * A browser drops anything else, and the banner would lose the colour without a word.
 */
const FUNCTIONAL = [
  functional(
    String.raw`rgba?\(${WS}*(?:${NUMBER}${COMMA}${NUMBER}${COMMA}${NUMBER}|${PERCENT}${COMMA}${PERCENT}${COMMA}${PERCENT})(?:${COMMA}${ALPHA})?${WS}*\)`,
  ),
  functional(
    String.raw`hsla?\(${WS}*${HUE}${COMMA}${PERCENT}${COMMA}${PERCENT}(?:${COMMA}${ALPHA})?${WS}*\)`,
  ),
  functional(
    String.raw`rgba?\(${WS}*(?:(?:${NUMBER}%?|none)${WS}+){2}(?:${NUMBER}%?|none)(?:${WS}*/${WS}*(?:${ALPHA}|none))?${WS}*\)`,
  ),
  functional(
    String.raw`hsla?\(${WS}*(?:${HUE}|none)${WS}+(?:${NUMBER}%?|none)${WS}+(?:${NUMBER}%?|none)(?:${WS}*/${WS}*(?:${ALPHA}|none))?${WS}*\)`,
  ),
];

/**
 * decisions §3: colours end up inside CSS, so only these forms pass: hex, rgb()/rgba()/hsl()/hsla()
 * with numeric arguments, and CSS named colours.
 */
export function isColor(value: string): boolean {
  return (
    value.length <= MAX_LENGTH &&
    (HEX.test(value) ||
      FUNCTIONAL.some((form) => form.test(value)) ||
      NAMED_COLORS.has(value.toLowerCase()))
  );
}
