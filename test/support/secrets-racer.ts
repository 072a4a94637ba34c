// A process that loads a data directory's secrets each time its parent says "go <dir>" on stdin,
// and answers one JSON line: what a daemon starting at that instant would have read.
import { createInterface } from "node:readline";
import { loadSecrets } from "#daemon/bootstrap.js";
import { loadConfig } from "#daemon/config.js";

process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  const dataDir = line.replace(/^go /, "");
  try {
    const secrets = await loadSecrets(loadConfig({ CONSENT_DATA_DIR: dataDir }));
    process.stdout.write(
      `${JSON.stringify({
        token: secrets.operatorToken,
        keys: secrets.identityKeys.length,
        problem: secrets.identityProblem ?? null,
      })}\n`,
    );
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ error: (error as Error).message })}\n`);
  }
}
