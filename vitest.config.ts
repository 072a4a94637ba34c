import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{daemon,gateway,cli,test}/**/*.test.{ts,tsx}"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Test files start real servers on port 0 and real stores in temp dirs; two cores here.
    pool: "forks",
    maxWorkers: 2,
  },
});
