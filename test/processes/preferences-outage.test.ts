import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PAGE_LANGUAGES, pageTexts } from "#gateway/preferences/page-texts.js";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import {
  DAEMON_URL,
  endpoints,
  PROGRAMS,
  STANDALONE_GATEWAY_URL,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";

const FORM = { "content-type": "application/x-www-form-urlencoded" };

/**
 * The preferences page of a stand-alone gateway whose daemon is down (decisions §5): a visit says
 * the settings could not be shown, and a save says, in the visitor's language, that the choices
 * were not saved, since nothing was.
 */
describe("the preferences page while the daemon is down", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-preferences-outage-");

  it("says a save was not saved and to save again in a moment, not only that the settings could not be shown", async () => {
    const dataDir = dirs.join("data");
    const daemon = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dataDir });
    const daemonUrl = await daemon.waitFor(DAEMON_URL);
    const gateway = startProgram(PROGRAMS.gateway, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_DAEMON_URL: daemonUrl,
    });
    const service = endpoints({
      daemonUrl,
      gatewayUrl: await gateway.waitFor(STANDALONE_GATEWAY_URL),
      operatorToken: (await readFile(path.join(dataDir, "admin-token"), "utf8")).trim(),
    });
    const { key } = await mintKey(service, await createTeam(service));
    const { publicId } = await createBanner(service, key);
    const logged = await postLog(service, aChoice(publicId));
    const link = new URL(logged.body.managePreferences).pathname;
    const save = async (headers: Record<string, string> = {}) => {
      const response = await fetch(`${service.gatewayUrl}${link}`, {
        method: "POST",
        headers: { ...FORM, ...headers },
        body: "category=analytics",
        redirect: "manual",
      });
      return { status: response.status, headers: response.headers, text: await response.text() };
    };
    expect((await save()).status).toBe(303);

    expect(await daemon.stop()).toBe(0);
    // The visit's page and the save's: each a 503 HTML page with its own sentence.
    const shown = await http(service, "GET", link);
    const failed = await save();
    expect([shown, failed].map((page) => [page.status, page.headers.get("content-type")])).toEqual([
      [503, "text/html; charset=utf-8"],
      [503, "text/html; charset=utf-8"],
    ]);
    expect(shown.text).toContain(
      "<h1>Something went wrong</h1>\n<p>Your privacy settings could not be shown just now. Please try again later.</p>",
    );
    expect(shown.text).not.toContain("not saved");
    // The save's page: not saved, the service briefly unavailable, so again in a moment from the
    // page it links back to; its title says no more than that (no "Something went wrong"), and
    // the 503 keeps its Retry-After.
    expect(failed.headers.get("retry-after")).toBe("1");
    expect(failed.text).toContain("<title>Your choices were not saved</title>");
    expect(failed.text).toContain(
      '<h1>Your choices were not saved</h1>\n<p>This service is briefly unavailable. Wait a moment, then open your privacy settings and save your choices again.</p>\n<p><a href="">Open your privacy settings</a></p>',
    );
    expect(failed.text).not.toContain("could not be shown");
    // A body that is not the form asks the daemon about the link first: not saved either.
    const notAForm = await save({ "content-type": "text/plain" });
    expect([notAForm.status, notAForm.text.includes("Your choices were not saved")]).toEqual([
      503,
      true,
    ]);

    // In every language the page ships, its own sentence for a save the unavailable service did
    // not make, never the English one.
    const german = await save({ "accept-language": "de-AT, en;q=0.5" });
    expect(german.text).toContain("<title>Ihre Auswahl wurde nicht gespeichert</title>");
    expect(german.text).toContain(
      '<h1>Ihre Auswahl wurde nicht gespeichert</h1>\n<p>Dieser Dienst ist kurzzeitig nicht verfügbar. Warten Sie einen Moment, öffnen Sie dann Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl erneut.</p>\n<p><a href="">Ihre Datenschutzeinstellungen öffnen</a></p>',
    );
    const english = pageTexts("en").texts.notSaved.because.unavailable;
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      const page = await save({ "accept-language": lang });
      expect([lang, page.status, page.headers.get("retry-after")]).toEqual([lang, 503, "1"]);
      expect(page.text).toContain(`<html lang="${lang}">`);
      expect(page.text).toContain(`<title>${texts.notSaved.title}</title>`);
      expect(page.text).toContain(`<h1>${texts.notSaved.title}</h1>`);
      expect(page.text).toContain(`<p>${texts.notSaved.because.unavailable}</p>`);
      expect(page.text).toContain(`<p><a href="">${texts.openSettings}</a></p>`);
      expect(page.text).not.toContain(texts.errors.other[0]);
      if (lang !== "en") expect([lang, page.text.includes(english)]).toEqual([lang, false]);
    }
    expect(await gateway.stop()).toBe(0);
  });
});
