import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { type Config, loadConfig } from "#daemon/config.js";
import type { Store } from "#daemon/store/store.js";

/** What the welcome says of the store: the commands for a first key, or what a restart finds. */
export type StoreOutlook = { keyedTeamIds: string[] } | "no keys";

/**
 * Whether the store already serves integrators (decisions §1): its teams, once it holds an API
 * key (one bounded read, KeyStore.holdsAny), so a restart's welcome lists what is there instead
 * of how to mint a first key. A store that cannot answer now gets the first-start text, as
 * before this check; its requests say why.
 */
export async function storeOutlook(store: Store, logger: Logger): Promise<StoreOutlook> {
  try {
    if (await store.keys.holdsAny()) {
      return { keyedTeamIds: (await store.teams.list()).map(({ id }) => id) };
    }
  } catch (err) {
    logger.warn({ err }, "could not read the store's teams and keys for the start-up message");
  }
  return "no keys";
}

/**
 * The start-up message: where the service listens, what a first start created, and the
 * consentctl commands to paste next, filled in to reach this process from any directory.
 */
export function printWelcome(
  config: Config,
  {
    storeKind,
    daemonUrl,
    gatewayUrl,
    created,
    outlook,
  }: {
    storeKind: string;
    daemonUrl: string;
    gatewayUrl: string | undefined;
    created: string[];
    outlook: StoreOutlook;
  },
) {
  const environment = cliEnvironment(config, daemonUrl);
  const cli = [...environment, packageBin("consentctl")].join(" ");
  const lines = [
    "",
    `consent service is running on the ${storeKind === "lmdb" ? `embedded store (${config.dataDir})` : "MongoDB store"}`,
    `  gRPC / Connect daemon  ${daemonUrl}`,
    ...(gatewayUrl
      ? [
          `  REST gateway           ${gatewayUrl}   (try: curl ${gatewayUrl}/api/v1/health)`,
          `  Public base URL        ${config.baseUrl}   (CONSENT_BASE_URL: loader tags, preference links)`,
          ...(basePortDiffers(config, gatewayUrl)
            ? [
                "  The gateway listens on another port than the public base URL names: set CONSENT_BASE_URL",
                "  to the address visitors reach, or loader tags and preference links will not work.",
              ]
            : []),
        ]
      : [
          // consentd alone: the gateway needs the same daemon address and operator token, and
          // the address loader tags and preference links name.
          `  REST gateway           not in this process; start one: ${[...environment, ...gatewayListenEnvironment(config), packageBin("consent-gateway")].join(" ")}`,
        ]),
    ...(created.length ? ["", `First start: created ${created.join(", ")}`] : []),
    "",
    ...(outlook === "no keys" ? mintCommands(cli) : listCommands(cli, outlook.keyedTeamIds)),
    // The operator's own token is never printed, and no file holds it for consentctl to read.
    ...(config.adminToken === undefined
      ? []
      : [
          "  (consentctl sends the operator token from CONSENT_ADMIN_TOKEN: set it to this service's",
          "  value in the shell that runs these)",
        ]),
    "",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

/** A store without keys: how to mint the first. */
function mintCommands(cli: string): string[] {
  return [
    "Mint an API key:",
    `  ${cli} teams create --name "My team" --plan professional`,
    `  ${cli} keys create --team <team id> --env live --scopes banners:read,banners:write,consent:read,consent:write`,
  ];
}

/** A store in use (a restart): how many teams it holds, and how to list them and their keys. */
function listCommands(cli: string, teamIds: string[]): string[] {
  const [only, ...others] = teamIds;
  const team = only !== undefined && others.length === 0 ? only : "<team id>";
  const count = teamIds.length === 1 ? "1 team" : `${teamIds.length} teams`;
  return [
    `The store holds ${count} and API keys; list them with:`,
    `  ${cli} teams list`,
    `  ${cli} keys list --team ${team}`,
  ];
}

/**
 * A program of this package as a command that runs from any directory: `node` and the bin's
 * absolute path. `npx consentctl` finds the package's own bin only inside its directory; anywhere
 * else npx looks the name up on the npm registry (and may install whatever package has it).
 */
function packageBin(name: "consentctl" | "consent-gateway"): string {
  return `node ${shellWord(fileURLToPath(new URL(`../bin/${name}.js`, import.meta.url)))}`;
}

/**
 * What consentctl needs to be told to reach this process (decisions §1): the daemon's address
 * when it is not the default, and the data directory holding the operator token always, since
 * the default (`./data`) is relative to the directory the command runs in. A token from
 * CONSENT_ADMIN_TOKEN is the operator's own and is never printed.
 */
function cliEnvironment(config: Config, listenUrl: string): string[] {
  const defaults = loadConfig({});
  // A wildcard listen address is no address to call: a local CLI calls loopback.
  const url = new URL(listenUrl);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  if (url.hostname === "[::]") url.hostname = "[::1]";
  const daemonUrl = url.origin;
  return [
    ...(config.adminToken === undefined ? [`CONSENT_DATA_DIR=${shellWord(config.dataDir)}`] : []),
    ...(daemonUrl !== defaults.daemonUrl ? [`CONSENT_DAEMON_URL=${daemonUrl}`] : []),
  ];
}

/** Host names of this machine a visitor's browser on it reaches the gateway by directly. */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Where the gateway started from consentd's message must listen (decisions §1), which consentd
 * itself never does: the REST address the operator gave this process (CONSENT_HTTP_PORT or PORT,
 * CONSENT_HTTP_HOST, as `npm start` would listen on), else the address a local CONSENT_BASE_URL
 * names, so the loader tags and preference links the daemon builds from it point at the gateway.
 * A base URL on another host, over https (the gateway serves plain HTTP) or under a path is
 * reached through a proxy, which may map ports: nothing is said of the port then. The gateway
 * never reads CONSENT_BASE_URL itself: the daemon builds the links from it and checks a session
 * write's Origin against it, and the preferences page compares an Origin with the request's host.
 */
function gatewayListenEnvironment(config: Config): string[] {
  const defaults = loadConfig({});
  const base = new URL(config.baseUrl);
  const direct =
    config.baseUrlSet &&
    base.protocol === "http:" &&
    base.pathname === "/" &&
    LOCAL_HOSTS.has(base.hostname);
  const port = config.httpPortSet ? config.httpPort : direct ? Number(base.port || 80) : undefined;
  const host =
    config.httpHost !== defaults.httpHost
      ? config.httpHost
      : direct && base.hostname === "[::1]"
        ? "::1"
        : undefined;
  return [
    ...(host === undefined ? [] : [`CONSENT_HTTP_HOST=${shellWord(host)}`]),
    ...(port === undefined || port === defaults.httpPort ? [] : [`CONSENT_HTTP_PORT=${port}`]),
  ];
}

/** A word a POSIX shell reads back unchanged: quoted when it holds anything but safe characters. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * Whether the default public base URL (CONSENT_BASE_URL unset) names a port other than the
 * gateway's; one the operator set stands, since a proxy may map it.
 */
function basePortDiffers(config: Config, gatewayUrl: string): boolean {
  if (config.baseUrlSet) return false;
  const port = (url: URL) => url.port || (url.protocol === "https:" ? "443" : "80");
  return port(new URL(config.baseUrl)) !== port(new URL(gatewayUrl));
}
