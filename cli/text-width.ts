import stringWidth from "string-width";
import { FORMATTED_TIME } from "#cli/format.js";

/**
 * How many terminal columns text takes: a CJK character or an emoji two, a combining mark or a
 * zero-width joiner none (string-width, as Ink measures its own layout).
 */
export function textWidth(text: string): number {
  return stringWidth(text);
}

/**
 * A word and the space before it: a run without a space, or one holding a time as formatTime
 * prints it ("published 2026-11-29 07:43:09Z" is two words, not three).
 */
const WORD = new RegExp(`(\\s*)(\\S*?${FORMATTED_TIME.source}\\S*|\\S+)`, "gu");

/**
 * The pieces of text a line may break between, each with the space before it: its words, and a
 * word of a comma-separated list ("banners:read,banners:write") split after each comma, so a
 * list wraps at its commas rather than inside an item.
 */
function pieces(text: string): { space: string; piece: string }[] {
  return [...text.matchAll(WORD)].flatMap(([, space = "", word = ""]) =>
    word.split(/(?<=,)(?=.)/u).map((piece, i) => ({ space: i === 0 ? space : "", piece })),
  );
}

/** The width in terminal columns of the widest piece of text a line cannot break (pieces). */
export function widestPiece(text: string): number {
  return Math.max(0, ...pieces(text).map(({ piece }) => textWidth(piece)));
}

/**
 * Text as lines of at most `width` columns, broken only between its pieces (at a space, after
 * a comma of a list, never inside a time), the space at a break left out. A piece wider than
 * `width` is a line of its own, which Ink breaks.
 */
export function wrapToWidth(text: string, width: number): string {
  const lines: string[] = [];
  let line = "";
  for (const { space, piece } of pieces(text)) {
    const joined = `${line}${space}${piece}`;
    if (line === "" || textWidth(joined) <= width) line = joined;
    else {
      lines.push(line);
      line = piece;
    }
  }
  return [...lines, line].join("\n");
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
