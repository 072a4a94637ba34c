import { describe, expect, it } from "vitest";
import { isColor, readColor } from "#daemon/banners/colors.js";
import { NAMED_COLORS } from "#daemon/banners/named-colors.js";
import { skipBrowserTests, useChromium, useTestPage } from "#test/support/browser.js";

/** Every form decisions §3 accepts, written the ways operators write them, edge values included. */
const FORMS = [
  "#abc",
  "#ABCD",
  "#a1b2c3",
  "#a1b2c380",
  "#00000010",
  "rgb(1, 2, 3)",
  "rgba(1,2,3,0.5)",
  "RGBA( 10% , 20% , 30.5% , 50% )",
  "rgb(127.5, 127.5, 127.5)",
  "rgb(300 -5 12.5)",
  "rgb(1 2 3 / .25)",
  "rgb(10% 20% 30%)",
  "rgb(none 50% 3 / none)",
  "rgba(1e2, 2e1, 3, 0.3333)",
  "rgb(0 0 0 / 2)",
  "rgb(0 0 0 / -1)",
  "rgb(1\t2\n3)",
  "hsl(120, 50%, 50%)",
  "hsla(120, 50%, 50%, .3)",
  "HSLA(0.5turn, 100%, 25%, 0.5)",
  "hsl(3.14159rad 80 40 / 80%)",
  "hsl(200grad 30% 60%)",
  "hsl(-90 110% 50%)",
  "hsl(none none 50%)",
  "hsl(720deg, 40%, 70%)",
  "hsl(33 57% 41%)",
  "hsl(10 -20% 50%)",
  "hsla(359.5deg, 100%, 100%, 0.25)",
  "hsl(4deg 167 61%)",
  "hsl(4deg 167% 61%)",
  "HSL(30 150% 30%)",
  "hsl(none 150% 30%)",
  "hsl(30 150% 30% / 50%)",
  "hsl(30 150% 30% / 0.5 )",
  "hsl(30 150% 30% / 5e-1)",
  "hsla(30, 150%, 30%, 50%)",
  "hsl(0 200 -5)",
  "hsl(60 300 20)",
  "hsl(1e999 50% 50%)",
  "hsl(0 0% 1e999%)",
  "hsl(90 1e999 50%)",
  "hsl(0 1e999 1e999)",
  "RebeccaPurple",
  "transparent",
];

/** The server's reading of configured colours, for the contrast it judges without a browser. */
describe.skipIf(skipBrowserTests)("readColor against Chromium", () => {
  const tab = useTestPage(useChromium());

  it("reads every named colour and functional form as Chromium computes it", async () => {
    const colors = [...NAMED_COLORS.keys(), ...FORMS];
    const computed = await tab.page.evaluate((list) => {
      const probe = document.body.appendChild(document.createElement("span"));
      return list.map((color) => {
        probe.style.color = "";
        probe.style.color = color;
        return probe.style.color === "" ? "refused" : getComputedStyle(probe).color;
      });
    }, colors);
    expect(colors.length).toBe(149 + FORMS.length);
    colors.forEach((color, i) => {
      const shown = computed[i] as string;
      const [r, g, b, alpha = 1] = (shown.match(/[\d.]+/g) ?? []).map(Number);
      expect(isColor(color), color).toBe(true);
      // The alpha too, as Chromium keeps it (8 bits) and prints it.
      expect(readColor(color), `${color} (Chromium: ${shown})`).toEqual([r, g, b, alpha]);
    });
  });

  it("reads nothing the validator refuses, though a browser might take it", () => {
    for (const color of ["currentcolor", "rgb(1.,2,3)", "red;", "#abcde", "hsl(1,2,3)", " red"]) {
      expect(readColor(color), color).toBeUndefined();
    }
  });
});
