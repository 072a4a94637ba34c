import { defineConfig } from "vitest/config";

// The suite runs in Pacific/Chatham (UTC+12:45, +13:45 in its summer: a date other than UTC's for
// half of each day, a :45 offset, a daylight-saving change) unless TZ is set, on every machine and
// in CI, whose clocks are UTC: a time shown or read in local time where UTC is promised (README,
// "Clock"; cli/README.md) fails a test there, as it would mislead an operator elsewhere. The test
// processes, the programs they start and consentctl (childEnv) inherit it.
process.env.TZ ||= "Pacific/Chatham";

/**
 * Test files that set the environment a library reads once, as it loads (Ink's CI detection): they
 * need a process of their own, where that library has not been loaded before them.
 */
const OWN_PROCESS = ["cli/run-command.test.tsx", "cli/lifecycle.test.tsx"];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // Node's, closing the Chromium the browser files of a test process share as it stops.
    environment: "./test/support/chromium-environment.ts",
    hookTimeout: 60_000,
    // Test files start real servers on port 0 and real stores in temp dirs. Three workers on the
    // two cores here: many files spend most of their time waiting out real intervals (a 10 s log
    // interval, a drain, a lockout's minute), during which a third file runs.
    pool: "forks",
    maxWorkers: 3,
    // A worker process runs one test file after another with the modules it has loaded: a fresh
    // process per file loaded the daemon's, the gateway's and the CLI's module graphs again for
    // each of some 160 files, about a second of CPU each. Every file starts its own services and
    // stores and closes them in its afterAll; the files in OWN_PROCESS still get a process each.
    isolate: false,
    projects: [
      {
        extends: true,
        test: {
          name: "service",
          include: ["{daemon,gateway,cli,test}/**/*.test.{ts,tsx}"],
          exclude: OWN_PROCESS,
        },
      },
      {
        // The files of OWN_PROCESS, each in a process of its own.
        extends: true,
        test: { name: "own-process", include: OWN_PROCESS, isolate: true },
      },
      {
        // The REST suites again with the gateway reaching the daemon over its port, as the
        // stand-alone gateway does (test/support/service.ts): every status, header and envelope
        // of split mode, through gateway/daemon-transport.ts and the daemon's Connect route.
        extends: true,
        test: {
          name: "split",
          include: ["test/{api,consent-log,loader,webhooks}/**/*.test.ts"],
          exclude: [
            // Starts its own programs, which the setting does not reach.
            "test/webhooks/processes.test.ts",
            // The daemon's consent-log RPCs (reads, tails, RecordConsent), called over its port
            // in either mode: the gateway only records their fixtures, as log-route.test.ts does.
            "test/consent-log/{consent-log-reads,consent-log-rpc,log-read-limit}.test.ts",
            // The loader cache (LoaderCache) called directly, reading banners over the daemon's
            // port in either mode: the gateway only makes and edits their fixtures.
            "test/loader/{loader-cache,loader-cache-held,loader-cache-stale,brotli-upgrades}.test.ts",
          ],
          env: { CONSENT_TEST_GATEWAY: "network" },
        },
      },
    ],
  },
});
