import { writeFile } from "node:fs/promises";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type cliFor,
  E2E_TIMEOUT_MS,
  startServiceWithTeam,
} from "#cli/test-support/cli-process.js";
import { runCliOnTerminal } from "#cli/test-support/pseudo-terminal.js";
import { textWidth } from "#cli/text-width.js";
import type { TestService } from "#test/support/service.js";

const BASE_URL = "https://consent.example.org";

describe.concurrent("consentctl banners (against a real daemon)", {
  timeout: E2E_TIMEOUT_MS,
}, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;
  const create = (...extra: string[]) =>
    cli.json([...argv`banners create --team ${teamId} --name Main --domain example.com`, ...extra]);

  beforeAll(async () => {
    ({ service, cli, teamId } = await startServiceWithTeam("starter", {
      CONSENT_BASE_URL: BASE_URL,
    }));
  });
  afterAll(() => service.close());

  it("creates a banner from flags and a --config file, flags winning over the file", async () => {
    const file = path.join(service.dataDir, "banner.json");
    await writeFile(
      file,
      JSON.stringify({
        layout: "inline",
        categories: [{ name: "necessary", required: true }, { name: "stats" }],
        texts: { de: { title: "Cookies" } },
      }),
    );
    const banner = await create(
      ...argv`--layout modal --primary-color #0a7 --ccpa --config ${file}`,
    );
    expect(banner).toMatchObject({
      teamId,
      name: "Main",
      domain: "https://example.com",
      isActive: true,
      revision: 1,
      compliance: { gdpr: true, ccpa: true, lgpd: false },
      configuration: { layout: "modal", primaryColor: "#0a7" },
    });
    const categories = banner.configuration.categories.map((c: { name: string }) => c.name);
    expect(categories).toEqual(["necessary", "stats"]);
    expect(Object.keys(banner.configuration.texts)).toEqual(["de"]);
    expect(banner.loaderSnippet).toBe(
      `<script src="${BASE_URL}/loader/${banner.publicId}.js"></script>`,
    );
  });

  it("prints the loader address the daemon serves, whatever the CLI's own CONSENT_BASE_URL", async () => {
    const banner = await create();
    const shown = await cli.run(argv`banners show ${banner.id} --team ${teamId} --json`, {
      env: { CONSENT_BASE_URL: "http://localhost:8080" },
    });
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      loaderUrl: `${BASE_URL}/loader/${banner.publicId}.js`,
      loaderSnippet: `<script src="${BASE_URL}/loader/${banner.publicId}.js"></script>`,
    });
  });

  it("lists and shows banners; show prints the loader snippet", async () => {
    const banner = await create();
    const [{ banners }, shown, human] = await Promise.all([
      cli.json(argv`banners list --team ${teamId}`),
      cli.json(argv`banners show ${banner.id} --team ${teamId}`),
      cli.run(argv`banners show ${banner.id} --team ${teamId}`),
    ]);
    expect(banners.map((b: { id: string }) => b.id)).toContain(banner.id);
    expect(shown).toMatchObject({ id: banner.id, publicId: banner.publicId });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(banner.publicId);
    expect(human.stdout).toContain(
      `<script src="${BASE_URL}/loader/${banner.publicId}.js"></script>`,
    );
  });

  // Regression: at 80 columns the snippet was printed as two lines, cut inside `.js`.
  it("prints the loader snippet whole on one line on an 80-column terminal, ready to paste", async () => {
    const banner = await create();
    const { code, screen } = await runCliOnTerminal(
      [
        ...argv`banners show ${banner.id} --team ${teamId}`,
        ...argv`--daemon ${service.daemonUrl} --token ${service.operatorToken}`,
      ],
      {},
      { columns: 80 },
    );
    expect(code).toBe(0);
    const lines = stripVTControlCharacters(screen).split("\r\n");
    const snippet = `<script src="${BASE_URL}/loader/${banner.publicId}.js"></script>`;
    expect(snippet.length).toBeGreaterThan(80);
    expect(lines).toContain(snippet);
    expect(lines[lines.indexOf(snippet) - 1]).toBe("Loader snippet:");
  });

  // Regression: widths counted characters, and a piped table cut a name in CJK characters.
  it("prints a piped table with names in wide characters whole and aligned", async () => {
    const team = await cli.json(argv`teams create --name ${"Wide names"} --plan starter`);
    const names = ["日本語のバナー名前", "Plain name"];
    for (const name of names) {
      await cli.json(argv`banners create --team ${team.id} --name ${name} --domain example.com`);
    }
    const listed = await cli.run(argv`banners list --team ${team.id}`);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    // DOMAIN starts at the same terminal column on every line.
    const domainAt = (line: string) => textWidth(line.slice(0, line.search(/DOMAIN|https:/)));
    expect(lines.map(domainAt)).toEqual(lines.map(() => domainAt(lines[0] as string)));
    expect(lines[1]).toMatch(/ {2}日本語のバナー名前 {2}https:/);
  });

  it("updates the draft, publishes it, deactivates and activates", async () => {
    const { id } = await create();
    const updated = await cli.json(
      argv`banners update ${id} --team ${teamId} --position top --name Renamed --no-gdpr`,
    );
    expect(updated).toMatchObject({
      name: "Renamed",
      hasUnpublishedChanges: true,
      revision: 1,
      compliance: { gdpr: false },
      configuration: { position: "top" },
    });
    const published = await cli.json(argv`banners publish ${id} --team ${teamId}`);
    expect(published).toMatchObject({ revision: 2, hasUnpublishedChanges: false });
    const inactive = await cli.json(argv`banners deactivate ${id} --team ${teamId}`);
    expect(inactive.isActive).toBe(false);
    const active = await cli.json(argv`banners activate ${id} --team ${teamId}`);
    expect(active.isActive).toBe(true);
  });

  it("warns of colour pairs below WCAG 2.2 AA on stderr, or in --json's warnings, and keeps the write", async () => {
    // 4.4994:1, which rounding would print as a passing 4.50:1.
    const text = "textColor on secondaryColor: contrast 4.49:1 is below WCAG 2.2 AA (4.5:1)";
    const buttons =
      "secondaryColor on primaryColor (buttons): contrast 2.99:1 is below WCAG 2.2 AA (4.5:1)";
    const created = await cli.run(
      argv`banners create --team ${teamId} --name Faint --domain example.com --text-color #058a24 --json`,
    );
    expect([created.code, created.stderr]).toEqual([0, ""]);
    const banner = JSON.parse(created.stdout);
    expect(banner.warnings).toEqual([text]);
    expect(banner.configuration.textColor).toBe("#058a24");

    // Without --json: the banner on stdout, a warning per failing pair on stderr, exit 0. The
    // update is judged on the draft it leaves (the text colour stays, the buttons now fail too).
    const updated = await cli.run(
      argv`banners update ${banner.id} --team ${teamId} --primary-color #0a7`,
    );
    expect(updated.code).toBe(0);
    expect(updated.stdout).toContain("Banner updated");
    expect(updated.stdout).not.toContain("warning");
    expect(updated.stderr).toBe(`warning: ${text}\nwarning: ${buttons}\n`);
    const shown = await cli.json(argv`banners show ${banner.id} --team ${teamId}`);
    expect(shown.configuration).toMatchObject({ primaryColor: "#0a7", textColor: "#058a24" });
    expect(shown.warnings).toBeUndefined();

    // Colours that meet AA: an empty list, nothing on stderr.
    const fixed = await cli.json(
      argv`banners update ${banner.id} --team ${teamId} --text-color #333 --primary-color ${"rgb(0 85 60)"}`,
    );
    expect(fixed.warnings).toEqual([]);
    const quiet = await cli.run(argv`banners update ${banner.id} --team ${teamId} --name Fixed`);
    expect([quiet.code, quiet.stderr]).toEqual([0, ""]);
  });

  it("judges an hsl() colour out of range as a browser shows it", async () => {
    // Chromium draws hsl(60 300 20) as rgb(204, 204, 0), and hsl(1e999 0% 100%) as white.
    for (const [color, ratio] of [
      ["hsl(60 300 20)", "1.72"],
      ["hsl(1e999 0% 100%)", "1.00"],
    ] as const) {
      const created = await cli.json(
        argv`banners create --team ${teamId} --name Range --domain example.com --text-color ${color}`,
      );
      expect(created.warnings).toEqual([
        `textColor on secondaryColor: contrast ${ratio}:1 is below WCAG 2.2 AA (4.5:1)`,
      ]);
    }
  });

  it("exits 1 listing every violated rule the daemon reports", async () => {
    const error = await cli.fails(
      argv`banners create --team ${teamId} --name Bad --domain example.com
        --primary-color url(evil) --text-color nope`,
    );
    expect(error.error).toBe("Validation failed.");
    expect(error.details?.map((d) => d.field)).toEqual([
      "configuration.primaryColor",
      "configuration.textColor",
    ]);
  });

  it("exits 2 for a layout, position or telemetry level outside their lists, naming the choices", async () => {
    const results = await Promise.all([
      cli.run(argv`banners create --team ${teamId} --name A --domain a.com --layout sideways`),
      cli.run(argv`banners update some-id --team ${teamId} --position left`),
      cli.run(argv`banners update some-id --team ${teamId} --telemetry-level full`),
    ]);
    for (const result of results) expect([result.code, result.stdout]).toEqual([2, ""]);
    expect(results[0]?.stderr).toContain("Allowed choices are banner, modal, inline");
    expect(results[1]?.stderr).toContain("Allowed choices are top, bottom, center");
    expect(results[2]?.stderr).toContain("Allowed choices are none, origin, path");
  });

  it("exits 1 for an unknown banner or team and for an unreadable or invalid --config", async () => {
    const notJson = path.join(service.dataDir, "not-json.json");
    await writeFile(notJson, "{ layout: modal");
    const withConfig = (file: string) =>
      cli.fails(argv`banners create --team ${teamId} --name A --domain a.com --config ${file}`);
    const [banner, team, missingFile, badFile, endless] = await Promise.all([
      cli.fails(argv`banners show no-such-banner --team ${teamId}`),
      cli.fails(argv`banners list --team no-such-team`),
      withConfig("/nonexistent.json"),
      withConfig(notJson),
      // A file that never ends: refused once past 1 MiB, not read into memory whole.
      withConfig("/dev/zero"),
    ]);
    expect(banner).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("banners list"),
    });
    expect(team.code).toBe("not_found");
    // Regression: "Cannot read the configuration file /nonexistent.json: ENOENT."
    expect(missingFile).toMatchObject({
      code: "config_file_unreadable",
      error: "Cannot read the configuration file /nonexistent.json: it does not exist.",
    });
    expect(badFile.code).toBe("config_file_invalid");
    expect(endless).toMatchObject({
      code: "config_file_invalid",
      error:
        "The configuration file /dev/zero holds more than 1 MiB; a banner's whole body may hold 256 KiB.",
    });
  });

  it("exits 2 when --team is missing or an update names no field", async () => {
    const [noTeam, noFields] = await Promise.all([
      cli.run(argv`banners list`),
      cli.run(argv`banners update some-id --team ${teamId}`),
    ]);
    expect(noTeam.code).toBe(2);
    expect(noTeam.stderr).toContain("required option '--team <id>'");
    expect(noFields.code).toBe(2);
    // One hint, commander's, after the sentence: the sentence pointed to --help as well.
    expect(noFields.stderr).toBe(
      "error: nothing to update: pass at least one field option\n(run the command with --help for usage)\n",
    );
    expect(noTeam.stdout + noFields.stdout).toBe("");
  });
});
