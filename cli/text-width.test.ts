import { describe, expect, it } from "vitest";
import { cutToWidth, fitToWidth, textWidth } from "#cli/text-width.js";

const FAMILY = "\u{1f468}\u200d\u{1f469}\u200d\u{1f467}"; // one emoji of three joined
const E_ACUTE = "e\u0301"; // e and a combining acute accent

describe("textWidth", () => {
  it("counts terminal columns, not characters", () => {
    expect(textWidth("日本語")).toBe(6);
    expect(textWidth(FAMILY)).toBe(2);
    expect(textWidth(E_ACUTE.repeat(3))).toBe(3);
  });
});

describe("cutToWidth", () => {
  it("keeps text that fits as it is", () => {
    expect(cutToWidth("日本語", 6)).toBe("日本語");
  });

  it("ends a cut in … within the width, leaving out a wide character that would straddle it", () => {
    expect(cutToWidth("日本語のバナー名前", 5)).toBe("日本…");
    expect(cutToWidth("日本語のバナー名前", 6)).toBe("日本…");
    expect(cutToWidth("日本語のバナー名前", 7)).toBe("日本語…");
    // At the width, or a column short where a wide character would have straddled it.
    for (let width = 1; width < 18; width++) {
      expect([width - 1, width]).toContain(textWidth(cutToWidth("日本語のバナー名前", width)));
    }
  });

  it("never cuts inside a grapheme: an emoji sequence or a letter with its accent", () => {
    expect(cutToWidth(`${FAMILY}${FAMILY}`, 3)).toBe(`${FAMILY}…`);
    expect(cutToWidth(`${FAMILY}x`, 2)).toBe("…");
    expect(cutToWidth(E_ACUTE.repeat(4), 3)).toBe(`${E_ACUTE.repeat(2)}…`);
  });

  it("pads to the width in columns", () => {
    expect(fitToWidth("日本", 6)).toBe("日本  ");
    expect(fitToWidth("日本語のバナー名前", 6)).toBe("日本… ");
  });
});
