import { builtinEnvironments, type Environment } from "vitest/environments";

/**
 * Where a test process keeps the Chromium its browser files share (browser.ts, useChromium): on
 * the global object, which this environment and the test files' modules both see.
 */
export const SHARED_CHROMIUM = Symbol.for("consent-service.sharedChromium");

/**
 * Vitest's node environment, which also closes the test process's shared Chromium as vitest
 * stops the process: vitest ends the process half a second after that, too soon for Playwright
 * to close a browser left open and remove its profile directory from the temp directory.
 */
export default {
  name: "node-sharing-chromium",
  viteEnvironment: "ssr",
  async setup(global, options) {
    const node = await builtinEnvironments.node.setup(global, options);
    return {
      async teardown(teardownGlobal) {
        const shared = (teardownGlobal as Record<symbol, Promise<{ close(): Promise<void> }>>)[
          SHARED_CHROMIUM
        ];
        await shared?.then((browser) => browser.close()).catch(() => {});
        await node.teardown(teardownGlobal);
      },
    };
  },
} satisfies Environment;
