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
          // The gateway serves plain HTTP: a URL without a port is on 80.
          ...basePortWarning(config, Number(new URL(gatewayUrl).port || 80)),
        ]
      : standAloneGateway(config, environment)),
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

/**
 * consentd alone: the command of a gateway with the same daemon address and operator token,
 * listening where loader tags and preference links point (gatewayListenEnvironment), and what
 * stands in the way of that address: a port only root may open, one the base URL does not name.
 */
function standAloneGateway(config: Config, environment: string[]): string[] {
  const listen = gatewayListenEnvironment(config);
  const command = [...environment, ...listen.environment, packageBin("consent-gateway")];
  return [
    `  REST gateway           not in this process; start one: ${command.join(" ")}`,
    ...(listen.port > 0 && listen.port < FIRST_UNPRIVILEGED_PORT
      ? [
          `  Port ${listen.port} is below ${FIRST_UNPRIVILEGED_PORT}: on Linux only root or a program with CAP_NET_BIND_SERVICE may listen`,
          `  there. Else run that gateway on a higher CONSENT_HTTP_PORT behind a proxy on port ${listen.port}.`,
        ]
      : []),
    // Port 0: any free port, which nothing can say in advance.
    ...(listen.port > 0 ? basePortWarning(config, listen.port) : []),
  ];
}

/**
 * The first port Linux lets any program listen on (net.ipv4.ip_unprivileged_port_start's
 * default): below it, root or CAP_NET_BIND_SERVICE. Listening there fails with EACCES, which the
 * gateway reports as one line (listenFailure).
 */
const FIRST_UNPRIVILEGED_PORT = 1024;

/** Host names of this machine a visitor's browser on it reaches the gateway by directly. */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * The public base URL, when a browser on this machine reaches the gateway there directly: a
 * plain http:// address of this machine without a path, as the default is. One on another host,
 * over https (the gateway serves plain HTTP) or under a path is a proxy's, which may map ports.
 */
function directBaseUrl(config: Config): URL | undefined {
  const base = new URL(config.baseUrl);
  return base.protocol === "http:" && base.pathname === "/" && LOCAL_HOSTS.has(base.hostname)
    ? base
    : undefined;
}

/**
 * Where the gateway started from consentd's message must listen (decisions §1), which consentd
 * itself never does: the REST address the operator gave this process (CONSENT_HTTP_PORT or PORT,
 * CONSENT_HTTP_HOST, as `npm start` would listen on), else the address a local CONSENT_BASE_URL
 * names, so the loader tags and preference links the daemon builds from it point at the gateway.
 * A base URL on another host, over https (the gateway serves plain HTTP) or under a path is
 * reached through a proxy, which may map ports: nothing is said of the port then. The gateway
 * never reads CONSENT_BASE_URL itself: the daemon builds the links from it and checks a session
 * write's Origin against it, and the preferences page compares an Origin with the request's host.
 * Returns the settings to print and the port the gateway will listen on with them.
 */
function gatewayListenEnvironment(config: Config): { environment: string[]; port: number } {
  const defaults = loadConfig({});
  const base = directBaseUrl(config);
  const port = config.httpPortSet || !base ? config.httpPort : Number(base.port || 80);
  const host =
    config.httpHost !== defaults.httpHost
      ? config.httpHost
      : base?.hostname === "[::1]"
        ? "::1"
        : undefined;
  return {
    environment: [
      ...(host === undefined ? [] : [`CONSENT_HTTP_HOST=${shellWord(host)}`]),
      ...(port === defaults.httpPort ? [] : [`CONSENT_HTTP_PORT=${port}`]),
    ],
    port,
  };
}

/** A word a POSIX shell reads back unchanged: quoted when it holds anything but safe characters. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * What to say when the gateway listens on another port than a public base URL a browser on this
 * machine reaches directly (directBaseUrl) names: loader tags and preference links would miss
 * it. The default base URL (CONSENT_BASE_URL unset) wants setting; one the operator set on this
 * machine works only through a proxy there. One elsewhere stands: a proxy may map its port.
 */
function basePortWarning(config: Config, gatewayPort: number): string[] {
  const base = directBaseUrl(config);
  const basePort = Number(base?.port || 80);
  if (!base || basePort === gatewayPort) return [];
  return config.baseUrlSet
    ? [
        `  The gateway listens on port ${gatewayPort}, CONSENT_BASE_URL names port ${basePort} of this machine: loader tags and`,
        `  preference links reach it only through a proxy on port ${basePort}; else set CONSENT_HTTP_PORT=${basePort}.`,
      ]
    : [
        "  The gateway listens on another port than the public base URL names: set CONSENT_BASE_URL",
        "  to the address visitors reach, or loader tags and preference links will not work.",
      ];
}
