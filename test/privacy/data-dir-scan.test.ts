import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import ipaddr from "ipaddr.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
} from "#test/support/api.js";
import { aChoice, postLog, storedRows } from "#test/support/consent-log.js";
import { startTestService } from "#test/support/service.js";

const SUBJECT_IDS = [
  "subject-ZXQ-7781-unique",
  "device:QK4F-88JD-ZZ01-7713",
  "crm_customer_00993127741",
  "Jürgen-Größe-ID-55120",
];
const NAMESPACES = [undefined, "mobile-app", "web-eu-2"];
const CLIENT_IPS = ["203.0.113.77", "2001:db8::7781:abcd", "198.51.100.23", "192.0.2.144"];
/** Stored on purpose: they prove the scan reads the records the subjects and banners live in. */
const BANNER_NAME = "Distinctive banner QWX-5519";
const CONSENT_ID = "7d0e5c2a-1b3f-4c8d-9e6a-5f4b3c2d1e0f";
/** What a visitor's post carries that a row never keeps (decisions §5). */
const USER_AGENT = "Mozilla/5.0 (Privacy-Scan UA-QV8812)";
const PAGE_URL =
  "https://pageuser:pagepass-QV17@shop.example.com/kept-path;jsessionid=QV-SESSION-4471?email=qv.visitor@example.org&token=QV-QUERY-SECRET-9931#qv-fragment-5521";
const REFERER =
  "https://refuser:refpass-QV23@shop.example.com/ref-path?email=qv.referer@example.org&token=QV-REFERER-SECRET-4402#qv-ref-fragment";
const NEVER_KEPT = [
  USER_AGENT,
  "pageuser",
  "pagepass-QV17",
  "QV-SESSION-4471",
  "qv.visitor@example.org",
  "QV-QUERY-SECRET-9931",
  "qv-fragment-5521",
  "refuser",
  "refpass-QV23",
  "qv.referer@example.org",
  "QV-REFERER-SECRET-4402",
  "qv-ref-fragment",
];
/** A well-formed key that names no key: tried by a failing client, never written down. */
const WRONG_KEY = "ck_live_QVwrongQVwrongQVwrongQVwrongQV000000";

/** Every way a string could sit in a file: UTF-8, UTF-16 (both byte orders). */
function encodings(text: string): Buffer[] {
  const utf16le = Buffer.from(text, "utf16le");
  return [Buffer.from(text, "utf8"), utf16le, Buffer.from(utf16le).swap16()];
}

/** An IP address as text and as its packed bytes. */
function ipEncodings(ip: string): Buffer[] {
  return [...encodings(ip), Buffer.from(ipaddr.parse(ip).toByteArray())];
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/**
 * decisions §2, §4 and §5: after a run, nothing under CONSENT_DATA_DIR holds a raw
 * subject id, a raw client IP, a full API key, a session token, a webhook secret, a wrong key
 * tried, or what a visitor's post carries beyond its telemetry level (user agent, credentials,
 * query, fragment, path parameters).
 */
describe("data directory after a run", () => {
  let dataDir: string;
  let key: string;
  let sessionToken: string;
  /** Secrets shown once and never to be stored: a rotated key, a rotated signing secret. */
  const shownOnce: { rotatedKey?: string; rotatedWebhookSecret?: string } = {};
  let webhookSecret: string;
  let preferencesToken: string;
  let files: { file: string; bytes: Buffer }[];

  const where = (needles: Buffer[]) =>
    files
      .filter(({ bytes }) => needles.some((needle) => bytes.includes(needle)))
      .map(({ file }) => path.relative(dataDir, file));

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-privacy-"));
    const service = await startTestService({
      gateway: true,
      dataDir,
      env: { CONSENT_TRUST_PROXY: "127.0.0.1", CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.0/8" },
    });
    try {
      const teamId = await createTeam(service, "business");
      ({ key } = await mintKey(service, teamId));
      const { publicId } = await createBanner(service, key, { name: BANNER_NAME });
      const [visitorIp = "", failingIp = "", dashboardIp = ""] = CLIENT_IPS;
      const from = (ip: string) => ({ "x-forwarded-for": ip });
      const send = async (method: string, route: string, body: unknown) => {
        const result = await http(service, method, route, { key, body, headers: from(visitorIp) });
        expect(result.status, result.text).toBe(200);
      };

      for (const subjectId of SUBJECT_IDS) {
        for (const namespace of NAMESPACES) {
          const subject = { bannerId: publicId, subjectId, namespace };
          const state = consentState({ consentId: CONSENT_ID });
          await send("PUT", "/api/v1/consent/subjects/state", {
            ...subject,
            baseVersion: 0,
            consentState: state,
          });
          await send("PUT", "/api/v1/consent/subjects/state", {
            ...subject,
            baseVersion: 1,
            consentState: { ...state, categories: ["necessary"] },
          });
          await send("POST", "/api/v1/consent/subjects/resolve", subject);
        }
        await send("DELETE", "/api/v1/consent/subjects/state", {
          bannerId: publicId,
          subjectId,
          namespace: "web-eu-2",
        });
      }

      const hook = await http(service, "POST", "/api/v1/webhooks", {
        key,
        body: { url: "http://127.0.0.1:9/hook" },
      });
      expect(hook.status, hook.text).toBe(201);
      webhookSecret = hook.body.data.webhook.secret;
      // A visitor's choice on a banner of each telemetry level (decisions §5), the page address
      // given as pageUrl and as the Referer alone.
      for (const telemetryLevel of ["none", "origin", "path"]) {
        const banner = await createBanner(service, key, { configuration: { telemetryLevel } });
        for (const [ip, pageUrl] of [
          [visitorIp, PAGE_URL],
          [CLIENT_IPS[1] ?? "", undefined],
        ]) {
          const posted = await postLog(service, aChoice(banner.publicId, { pageUrl }), {
            ip,
            referer: REFERER,
            headers: { "user-agent": USER_AGENT },
          });
          expect(posted.status, posted.text).toBe(200);
        }
      }
      // The preferences page behind a link, seen and saved from another address (decisions §5):
      // its consent_changed row keeps no more of the visitor than the log route's.
      const chosen = await postLog(service, aChoice(publicId), { ip: visitorIp });
      expect(chosen.status, chosen.text).toBe(200);
      const link = new URL(chosen.body.managePreferences).pathname;
      preferencesToken = link.split("/")[2] as string;
      const visitor = { ...from(CLIENT_IPS[3] ?? ""), "user-agent": USER_AGENT };
      const page = await http(service, "GET", link, { headers: visitor });
      expect(page.status, page.text).toBe(200);
      const saved = await http(service, "POST", link, {
        body: "category=analytics",
        headers: { ...visitor, "content-type": "application/x-www-form-urlencoded" },
      });
      // fetch follows the save's 303 back to the page.
      expect(saved.status, saved.text).toBe(200);

      const rows = (await storedRows(service, teamId)).map((row) => row.pageUrl);
      expect(rows).toEqual(
        expect.arrayContaining([
          "https://shop.example.com/kept-path",
          "https://shop.example.com/ref-path",
          "https://shop.example.com",
        ]),
      );

      // Failed authentications are counted per client IP: the 11th in a minute is refused.
      let lastStatus = 0;
      for (let i = 0; i < 11; i++) {
        const result = await http(service, "GET", "/api/v1/banners", {
          key: i % 2 === 0 ? "ck_live_not-a-key" : WRONG_KEY,
          headers: from(failingIp),
        });
        lastStatus = result.status;
      }
      expect(lastStatus).toBe(429);
      const { admin, auth } = operator(service);
      // A rotation's key and a webhook's new signing secret are shown once, as a creation's.
      const { id: keyId } = await mintKey(service, teamId);
      shownOnce.rotatedKey = (
        await admin.rotateApiKey({ id: keyId, gracePeriodSeconds: 60 }, auth)
      ).secret;
      const rotated = await http(
        service,
        "PATCH",
        `/api/v1/webhooks/${hook.body.data.webhook.id}`,
        {
          key,
          body: { rotateSecret: true },
        },
      );
      expect(rotated.status, rotated.text).toBe(200);
      shownOnce.rotatedWebhookSecret = rotated.body.data.webhook.secret;
      const { token } = await admin.createSession({ teamId }, auth);
      sessionToken = token;
      const viaSession = await http(service, "GET", "/api/v1/banners", {
        headers: { cookie: `consent_session=${token}`, ...from(dashboardIp) },
      });
      expect(viaSession.headers.get("x-ratelimit-remaining")).toBe("99");
    } finally {
      await service.close();
    }
    files = await Promise.all(
      (await filesUnder(dataDir)).map(async (file) => ({ file, bytes: await readFile(file) })),
    );
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("scans the store's files, which do hold the banner and the consent states written", () => {
    expect(files.map(({ file }) => path.relative(dataDir, file))).toEqual(
      expect.arrayContaining(["admin-token", "identity-key"]),
    );
    expect(where(encodings(BANNER_NAME)).length).toBeGreaterThan(0);
    expect(where(encodings(CONSENT_ID)).length).toBeGreaterThan(0);
  });

  it.each(SUBJECT_IDS)("holds no trace of the subject id %s", (subjectId) => {
    expect(where(encodings(subjectId))).toEqual([]);
  });

  it.each(CLIENT_IPS)("holds no trace of the client IP %s, as text or as bytes", (ip) => {
    expect(where(ipEncodings(ip))).toEqual([]);
  });

  it.each(NEVER_KEPT)("holds no trace of %s from a visitor's post", (text) => {
    expect(where(encodings(text))).toEqual([]);
  });

  it("holds no session token, webhook secret, preferences link or wrong key tried, as text or as bytes", () => {
    for (const secret of [webhookSecret, shownOnce.rotatedWebhookSecret as string]) {
      const secretBytes = Buffer.from(secret.slice("whsec_".length), "base64");
      expect(where([...encodings(secret), secretBytes])).toEqual([]);
    }
    expect(where(encodings(sessionToken))).toEqual([]);
    expect(where(encodings(preferencesToken))).toEqual([]);
    expect(where(encodings(WRONG_KEY))).toEqual([]);
  });

  it("holds no full API key and not its secret part, only its digest", () => {
    const digest = createHash("sha256").update(key).digest();
    expect(where([digest, Buffer.from(digest.toString("hex"))]).length).toBeGreaterThan(0);
    expect(where(encodings(key))).toEqual([]);
    expect(where(encodings(key.slice("ck_live_".length)))).toEqual([]);
    const rotatedKey = shownOnce.rotatedKey as string;
    expect(where([...encodings(rotatedKey), ...encodings(rotatedKey.slice(8))])).toEqual([]);
  });
});
