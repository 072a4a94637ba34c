import stringWidth from "string-width";

/**
 * How many terminal columns text takes: a CJK character or an emoji two, a combining mark or a
 * zero-width joiner none (string-width, as Ink measures its own layout).
 */
export function textWidth(text: string): number {
  return stringWidth(text);
}

/**
 * The width in terminal columns of the longest run without a space, which a line cannot break but
 * by cutting it.
 */
export function longestWord(text: string): number {
  return Math.max(0, ...text.split(/\s+/).map(textWidth));
}

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/**
 * Text cut to at most `width` columns, ending in "…" when it had to be cut: only between
 * graphemes (a character with its combining marks, an emoji sequence), never inside one, and
 * a wide character that would straddle the edge goes whole, so the result may be a column
 * narrower than `width`, never wider.
 */
export function cutToWidth(text: string, width: number): string {
  if (textWidth(text) <= width) return text;
  if (width < 1) return "";
  let kept = "";
  let used = 0;
  for (const { segment } of graphemes.segment(text)) {
    const next = textWidth(segment);
    if (used + next > width - 1) break;
    kept += segment;
    used += next;
  }
  return `${kept}…`;
}

/** Text cut to `width` columns (cutToWidth) and padded with spaces to exactly that many. */
export function fitToWidth(text: string, width: number): string {
  const cut = cutToWidth(text, width);
  return cut + " ".repeat(Math.max(0, width - textWidth(cut)));
}
