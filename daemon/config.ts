import { isIPv6 } from "node:net";
import path from "node:path";
import proxyAddr from "@fastify/proxy-addr";
import { parseIdentityKeys } from "#daemon/identity/subject-identity.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";

/**
 * Settings of decisions §1, read from the environment. One table serves the daemon, the gateway
 * and the CLI, so the three always agree on where the daemon and its secrets are.
 */
export interface Config {
  dataDir: string;
  mongoUri: string | undefined;
  /**
   * CONSENT_MONGODB_TIMEOUT_MS: the bound of each wait of a command on MongoDB, from which a
   * request that meets a server that does not answer fails with 503 (mongo-timeouts.ts); unset:
   * 10 s. Read only with MONGODB_URI.
   */
  mongoTimeoutMs: number | undefined;
  /**
   * CONSENT_LOG_READ_TIMEOUT_MS: how long one read of the consent log on the embedded store (a
   * listing, a count, a page of an export) may run before it answers query_too_broad
   * (lmdb-consent-log-store.ts); unset: 10 s, MongoDB's default. MongoDB stops its reads at
   * CONSENT_MONGODB_TIMEOUT_MS instead, so the setting is refused beside MONGODB_URI.
   */
  logReadTimeoutMs: number | undefined;
  httpHost: string;
  httpPort: number;
  /**
   * Whether CONSENT_HTTP_PORT (or PORT) was set, so consentd's welcome can hand it on to the
   * gateway it tells the operator to start (welcome.ts).
   */
  httpPortSet: boolean;
  grpcHost: string;
  grpcPort: number;
  daemonUrl: string;
  baseUrl: string;
  /** Whether CONSENT_BASE_URL was set; unset, baseUrl is the default a newcomer's gateway uses. */
  baseUrlSet: boolean;
  /** Operator token from CONSENT_ADMIN_TOKEN; else it lives in <dataDir>/admin-token. */
  adminToken: string | undefined;
  /** CONSENT_IDENTITY_KEY; else (embedded store only) <dataDir>/identity-key. */
  identityKey: string | undefined;
  /**
   * Proxy addresses, CIDRs or the names loopback, linklocal and uniquelocal, whose
   * X-Forwarded-For names the client.
   */
  trustProxy: string[];
  /** CONSENT_GEO_HEADER: a header set by a trusted proxy with the visitor's country (CF-IPCountry). */
  geoHeader: string | undefined;
  logLevel: string;
  /** CONSENT_WEBHOOK_ALLOW_CIDRS: ranges webhook delivery may reach despite the SSRF guard. */
  webhookAllowCidrs: string[];
  /**
   * CONSENT_WEBHOOK_LEASE_MS: how long a dispatcher's claim on a webhook event or delivery lasts
   * before another daemon (or its own restart) may take it over; unset: 60 s (dispatcher.ts).
   */
  webhookLeaseMs: number | undefined;
  /**
   * CONSENT_MIN_FREE_MB: the embedded store refuses writes while its disk has less free space
   * than this (daemon/store/disk-guard.ts); 0 turns the guard off. Default 64.
   */
  minFreeMb: number;
  /**
   * CONSENT_LOADER_CACHE_MB: the bound on the loader responses a gateway process keeps in memory
   * (gateway/loader/loader-cache.ts). Default 256.
   */
  loaderCacheMb: number;
  /**
   * CONSENT_DRAIN_TIMEOUT_MS: how long a stop signal's drain waits for the requests and calls in
   * flight before it cuts the connections still open (drain-exit.ts), in every program and worker.
   */
  drainTimeoutMs: number;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * A start-up failure the operator fixes from its message alone (a data directory that cannot be
 * created, a store that cannot be opened): the bins print it as one line, without a stack.
 */
export class StartupError extends Error {
  override name = "StartupError";
}

/** The settings behind a listener, to say what to change when it cannot open. */
export interface ListenSettings {
  host: string;
  port: string;
  /** Another listener's port setting with the same value (npm start: the daemon's, or the gateway's). */
  samePortAs?: string;
}

/**
 * A listener that could not open, said with the settings that chose its address (Node's words
 * name a port or an address, never the variable): a StartupError the programs print as one line.
 * Any other failure is returned as it is.
 */
export function listenFailure(error: unknown, settings: ListenSettings): unknown {
  const { code, message } = error as NodeJS.ErrnoException;
  const fix =
    code === "EADDRINUSE"
      ? settings.samePortAs
        ? `${settings.port} and ${settings.samePortAs} are the same; choose another`
        : `another process holds that port; choose another ${settings.port}`
      : code === "EACCES"
        ? `ports below 1024 need privileges; choose a higher ${settings.port}`
        : code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN"
          ? `${settings.host} must name an address of this machine`
          : undefined;
  return fix ? new StartupError(`${message} (${fix})`, { cause: error }) : error;
}

/** CONSENT_MIN_FREE_MB when unset: room for many thousands of records, far from a full disk. */
const DEFAULT_MIN_FREE_MB = 64;

/** CONSENT_LOADER_CACHE_MB when unset: thousands of banners, or one in hundreds of regions. */
export const DEFAULT_LOADER_CACHE_MB = 256;

/**
 * CONSENT_DRAIN_TIMEOUT_MS when unset: inside `docker stop`'s 10 s between SIGTERM and SIGKILL
 * (Kubernetes gives 30 s), with 2 s left for what follows the cut (the store closing, the exit),
 * so a container stopped with the defaults exits on its own, 0, instead of being killed.
 */
export const DEFAULT_DRAIN_TIMEOUT_MS = 8_000;

/** pino's levels, and `silent`. */
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/**
 * A whole number from `min` to `max` written in decimal digits (surrounding spaces allowed), or
 * undefined when unset: what every numeric setting accepts, so "1e3", "0x50" or "8.0" are refused
 * alike. `what` names the number in the error ("a port number", "a whole number of milliseconds").
 */
export function wholeNumberIn(
  value: string | undefined,
  min: number,
  max: number,
  name: string,
  what: string,
): number | undefined {
  if (value === undefined || value === "") return undefined;
  const parsed = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || parsed < min || parsed > max) {
    throw new ConfigError(`${name} must be ${what} from ${min} to ${max}, not "${value}"`);
  }
  return parsed;
}

/**
 * A listen address (decisions §1): a host name or an IP address, an IPv6 one also in the brackets
 * URLs write it in (`[::1]`), which listen() would otherwise look up as a name and not find. White
 * space, which no host name holds, is refused here rather than met as a failed look-up.
 */
function listenHost(value: string | undefined, name: string): string {
  if (value === undefined || value === "") return "127.0.0.1";
  const bracketed = /^\[(.*)\]$/.exec(value)?.[1];
  if (bracketed !== undefined && isIPv6(bracketed)) return bracketed;
  if (/\s/.test(value)) {
    throw new ConfigError(
      `${name} must be a host name or an IP address such as 127.0.0.1 or ::1, without white space, not "${value}"`,
    );
  }
  return value;
}

/**
 * decisions §1: `CONSENT_DATA_DIR`, `./data` when unset. A value that is blank, or begins or ends
 * with white space (an `.env` line such as `CONSENT_DATA_DIR= /var/lib/consent`), would name a
 * directory other than the one meant, made where the service starts: refused, saying so.
 */
function dataDirectory(value: string | undefined): string {
  if (value === undefined || value === "") return path.resolve("./data");
  if (value.trim() !== value) {
    throw new ConfigError(
      value.trim() === ""
        ? `CONSENT_DATA_DIR is blank ("${value}"): unset it for ./data, or name a directory`
        : `CONSENT_DATA_DIR begins or ends with white space ("${value}"), which would name another directory than meant: remove it`,
    );
  }
  return path.resolve(value);
}

function port(value: string | undefined, fallback: number, name: string): number {
  return wholeNumberIn(value, 0, 65535, name, "a port number") ?? fallback;
}

/**
 * An absolute http(s) URL: both are read by HTTP clients (the gateway's, visitors' browsers). A
 * refused value is repeated in the message without its user info, which may hold a password.
 */
function httpUrl(value: string, name: string, example: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    const port = outOfRangePort(value);
    throw new ConfigError(
      port === undefined
        ? `${name} must be an absolute URL, not "${withoutUserInfo(value)}"`
        : `${name} names port ${port} ("${withoutUserInfo(value)}"); a port is a number from 1 to 65535`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ConfigError(
      `${name} must be an http:// or https:// URL such as ${example}, not "${withoutUserInfo(value)}"`,
    );
  }
  return parsed;
}

/**
 * A URL's `scheme://` (when it has one) and its user info. A value refused for its form may hold
 * a password with `/`, `?`, `#` or `@` unescaped, so the user info runs to the last `@`: an `@`
 * further on (in a query) hides a little more than user info, never less.
 */
const USER_INFO = /^([a-z][a-z0-9+.-]*:\/\/)?(.*)@/is;

/** `value` with the user info of its authority (`user:password@`) replaced by `***@`. */
export function withoutUserInfo(value: string): string {
  return value.replace(USER_INFO, "$1***@");
}

/**
 * `text` (a parser's words about `value`) without `value`'s user info, exactly where it stands:
 * as a URL's user info (`//name:password@`, `//name@`), as sent or percent-decoded, written
 * `//***@`; and a user name or password holding a character a URL's user info must escape
 * (`/ ? # [ ] @ :` or `%`), which a parser names alone when it refuses it for that ("Username
 * contains unescaped characters ops/admin"), written `***` wherever it stands apart from letters
 * and digits. A name or password of letters and digits alone is never told apart from a word of
 * the text that is the same ("a", "be"), so it is left as it stands outside a URL: no parser
 * names such a one alone, and masking every like word would garble the message.
 */
export function withoutUserInfoOf(value: string, text: string): string {
  const userInfo = USER_INFO.exec(value)?.[2];
  if (!userInfo) return text;
  const colon = userInfo.indexOf(":");
  const parts = colon < 0 ? [userInfo] : [userInfo.slice(0, colon), userInfo.slice(colon + 1)];
  let hidden = text;
  for (const form of formsOf([userInfo, ...(colon < 0 ? [] : [parts[0] ?? ""])])) {
    hidden = hidden.replace(new RegExp(`//${escapedForPattern(form)}@`, "gu"), "//***@");
  }
  return withoutWordsOf(
    hidden,
    parts.filter((part) => ESCAPED_IN_USER_INFO.test(part)),
  );
}

/**
 * `text` with each of `secrets`, as written or percent-decoded, written `***` wherever it stands
 * apart from letters and digits: a piece of a secret a parser names alone in its words.
 */
export function withoutWordsOf(text: string, secrets: readonly string[]): string {
  let hidden = text;
  for (const form of formsOf(secrets)) {
    hidden = hidden.replace(
      new RegExp(`(?<![\\p{L}\\p{N}])${escapedForPattern(form)}(?![\\p{L}\\p{N}])`, "gu"),
      "***",
    );
  }
  return hidden;
}

/** Each piece as written and percent-decoded, the longest first, so none is left half masked. */
function formsOf(pieces: readonly string[]): string[] {
  return [...new Set(pieces.flatMap((piece) => [piece, decodedOrNot(piece)]).filter(Boolean))].sort(
    (a, b) => b.length - a.length,
  );
}

/** A character a URL's user info holds only percent-encoded, or `%` itself (RFC 3986 3.2.1). */
const ESCAPED_IN_USER_INFO = /[/?#[\]@:%]/;

function escapedForPattern(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** `text` percent-decoded, or as it is when it is not valid percent-encoding. */
export function decodedOrNot(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The port an address that URL parsing refused names, when that is why: WHATWG URLs refuse a
 * port past 65535 as they refuse a relative address, and the two call for different words.
 */
export function outOfRangePort(value: string): string | undefined {
  const port = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*:(\d+)(?:[/?#]|$)/i.exec(value)?.[1];
  return port !== undefined && Number(port) > 65_535 ? port : undefined;
}

/**
 * What `url` carries besides scheme, host, port and path, none of which an address of this
 * service may: a query string or fragment (an empty `?` or `#` too, which a URL keeps), and user
 * info (a name, a password). Each is named for a message.
 */
function addressExtras(url: URL): string[] {
  const beforeFragment = url.href.split("#")[0] ?? "";
  return [
    ...(beforeFragment.includes("?") ? ["a query string (?...)"] : []),
    ...(url.href.includes("#") ? ["a fragment (#...)"] : []),
    ...(url.username || url.password ? ["user info (user:password@)"] : []),
  ];
}

/**
 * Why a URL cannot be the daemon's address, if it cannot: the daemon serves its services at the
 * root of its port, so a path, query or fragment would send every call astray (answered 404), and
 * user info would be ignored (the operator token travels as metadata). The message never repeats
 * the URL, which may carry a password.
 */
export function daemonAddressProblem(url: URL): string | undefined {
  if (url.pathname === "/" && addressExtras(url).length === 0) return undefined;
  return "must be the daemon's address alone (scheme, host and port, such as http://127.0.0.1:50051): the daemon serves at the root, so a path, query, fragment or user name has no place in it";
}

/** CONSENT_DAEMON_URL: an http(s) URL naming the daemon's port, nothing more. */
function daemonUrl(value: string, name: string): string {
  const parsed = httpUrl(value, name, "http://127.0.0.1:50051");
  const problem = daemonAddressProblem(parsed);
  if (problem) throw new ConfigError(`${name} ${problem}`);
  return parsed.toString().replace(/\/$/, "");
}

/**
 * CONSENT_BASE_URL: where visitors reach the gateway, with a path when a proxy serves it under
 * one. Loader tags and preference links are this address with a path appended (decisions §1,
 * §5 `{CONSENT_BASE_URL}/preferences/{token}`, §6 `{CONSENT_BASE_URL}/loader/{publicId}.js`), so
 * a query or fragment would break every one of them, and user info would be printed at start-up
 * and handed to every site in its tag. The message never repeats the URL.
 */
function publicBaseUrl(value: string, name: string): string {
  const parsed = httpUrl(value, name, "https://consent.example.com");
  const extras = addressExtras(parsed);
  if (extras.length > 0) {
    throw new ConfigError(
      `${name} carries ${extras.slice(0, -1).join(", ")}${extras.length > 1 ? " and " : ""}${extras.at(-1)}: loader tags and preference links are built by appending a path to it, so give scheme, host, port and an optional path alone, such as https://consent.example.com/consent`,
    );
  }
  return parsed.toString().replace(/\/$/, "");
}

function logLevel(value: string | undefined): string {
  if (!value) return "info";
  if (!LOG_LEVELS.includes(value)) {
    throw new ConfigError(
      `CONSENT_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, not "${value}"`,
    );
  }
  return value;
}

function headerName(value: string | undefined, name: string): string | undefined {
  if (!value) return undefined;
  if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(value)) {
    throw new ConfigError(
      `${name} must be an HTTP header name such as CF-IPCountry, not "${value}"`,
    );
  }
  return value;
}

/** decisions §8: comma-separated CIDRs (or single addresses), each checked now, not at first use. */
function cidrList(value: string | undefined, name: string): string[] {
  const entries = (value ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  try {
    new AddressGuard(entries);
  } catch (error) {
    throw new ConfigError(`${name}: ${(error as Error).message}`);
  }
  return entries;
}

/**
 * CONSENT_TRUST_PROXY (decisions §1: addresses or CIDRs, never a hop count), each entry checked now
 * by the parser the gateway's Fastify compiles it with (@fastify/proxy-addr), so a mistake stops
 * start-up before anything listens. That parser also takes the names loopback, linklocal and
 * uniquelocal for their ranges.
 */
function trustedProxies(value: string | undefined): string[] {
  const entries = (value ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.some((entry) => /^\d+$/.test(entry))) {
    throw new ConfigError("CONSENT_TRUST_PROXY lists proxy addresses or CIDRs, never a hop count");
  }
  for (const entry of entries) {
    try {
      proxyAddr.compile(entry);
    } catch {
      throw new ConfigError(
        `CONSENT_TRUST_PROXY: "${entry}" is not an IP address, a CIDR such as 10.0.0.0/8, or one of loopback, linklocal, uniquelocal`,
      );
    }
  }
  return entries;
}

/**
 * CONSENT_IDENTITY_KEY checked now, so a malformed key stops start-up with a readable line. The
 * message says which key of the list is wrong, never what it holds: the value is a secret.
 */
function identityKey(value: string | undefined): string | undefined {
  if (!value) return undefined;
  try {
    parseIdentityKeys(value);
  } catch (error) {
    throw new ConfigError(
      `CONSENT_IDENTITY_KEY: ${(error as Error).message} (make one with: openssl rand -base64 32)`,
    );
  }
  return value;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const trustProxy = trustedProxies(env.CONSENT_TRUST_PROXY);
  const geoHeader = headerName(env.CONSENT_GEO_HEADER, "CONSENT_GEO_HEADER");
  // The geo header is believed only from a trusted proxy (gateway/loader/routes.ts): without one
  // it would never be read, which is a setting that silently does nothing.
  if (geoHeader && trustProxy.length === 0) {
    throw new ConfigError(
      `CONSENT_GEO_HEADER is read only from the proxies CONSENT_TRUST_PROXY names (visitors could otherwise pick their own jurisdiction): set CONSENT_TRUST_PROXY to the proxy that sets ${geoHeader}`,
    );
  }
  const logReadTimeoutMs = wholeNumberIn(
    env.CONSENT_LOG_READ_TIMEOUT_MS,
    1_000,
    600_000,
    "CONSENT_LOG_READ_TIMEOUT_MS",
    "a whole number of milliseconds",
  );
  // A setting the store in use never reads is refused, not silently ignored.
  if (logReadTimeoutMs !== undefined && env.MONGODB_URI) {
    throw new ConfigError(
      "CONSENT_LOG_READ_TIMEOUT_MS bounds the embedded store's reads of the consent log; with MONGODB_URI set, CONSENT_MONGODB_TIMEOUT_MS bounds them: set that instead",
    );
  }
  return {
    dataDir: dataDirectory(env.CONSENT_DATA_DIR),
    mongoUri: env.MONGODB_URI || undefined,
    mongoTimeoutMs: wholeNumberIn(
      env.CONSENT_MONGODB_TIMEOUT_MS,
      1_000,
      600_000,
      "CONSENT_MONGODB_TIMEOUT_MS",
      "a whole number of milliseconds",
    ),
    logReadTimeoutMs,
    httpHost: listenHost(env.CONSENT_HTTP_HOST, "CONSENT_HTTP_HOST"),
    httpPort: port(
      env.CONSENT_HTTP_PORT || env.PORT,
      8080,
      env.CONSENT_HTTP_PORT ? "CONSENT_HTTP_PORT" : "PORT",
    ),
    httpPortSet: Boolean(env.CONSENT_HTTP_PORT || env.PORT),
    grpcHost: listenHost(env.CONSENT_GRPC_HOST, "CONSENT_GRPC_HOST"),
    grpcPort: port(env.CONSENT_GRPC_PORT, 50051, "CONSENT_GRPC_PORT"),
    daemonUrl: daemonUrl(env.CONSENT_DAEMON_URL || "http://127.0.0.1:50051", "CONSENT_DAEMON_URL"),
    baseUrl: publicBaseUrl(env.CONSENT_BASE_URL || "http://localhost:8080", "CONSENT_BASE_URL"),
    baseUrlSet: Boolean(env.CONSENT_BASE_URL),
    adminToken: env.CONSENT_ADMIN_TOKEN || undefined,
    identityKey: identityKey(env.CONSENT_IDENTITY_KEY),
    trustProxy,
    geoHeader,
    logLevel: logLevel(env.CONSENT_LOG_LEVEL),
    webhookAllowCidrs: cidrList(env.CONSENT_WEBHOOK_ALLOW_CIDRS, "CONSENT_WEBHOOK_ALLOW_CIDRS"),
    minFreeMb:
      wholeNumberIn(
        env.CONSENT_MIN_FREE_MB,
        0,
        100_000_000,
        "CONSENT_MIN_FREE_MB",
        "a whole number of megabytes",
      ) ?? DEFAULT_MIN_FREE_MB,
    loaderCacheMb:
      wholeNumberIn(
        env.CONSENT_LOADER_CACHE_MB,
        1,
        1_000_000,
        "CONSENT_LOADER_CACHE_MB",
        "a whole number of megabytes",
      ) ?? DEFAULT_LOADER_CACHE_MB,
    drainTimeoutMs:
      wholeNumberIn(
        env.CONSENT_DRAIN_TIMEOUT_MS,
        1_000,
        600_000,
        "CONSENT_DRAIN_TIMEOUT_MS",
        "a whole number of milliseconds",
      ) ?? DEFAULT_DRAIN_TIMEOUT_MS,
    webhookLeaseMs: wholeNumberIn(
      env.CONSENT_WEBHOOK_LEASE_MS,
      1_000,
      3_600_000,
      "CONSENT_WEBHOOK_LEASE_MS",
      "a whole number of milliseconds",
    ),
  };
}
