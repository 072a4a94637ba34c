import { randomBytes } from "node:crypto";
import path from "node:path";
import { fastify } from "fastify";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "#daemon/config.js";

/**
 * decisions §1: `CONSENT_DATA_DIR` `./data`; `CONSENT_HTTP_PORT` (or `PORT`) / `CONSENT_HTTP_HOST`
 * `8080` / `127.0.0.1`; `CONSENT_GRPC_PORT` / `CONSENT_GRPC_HOST` `50051` / `127.0.0.1`;
 * `CONSENT_DAEMON_URL` `http://127.0.0.1:50051`.
 */
describe("listen addresses and the data directory", () => {
  it("default to ./data, 127.0.0.1:8080 for HTTP, 127.0.0.1:50051 for gRPC and that daemon URL", () => {
    expect(loadConfig({})).toMatchObject({
      dataDir: path.resolve("data"),
      httpHost: "127.0.0.1",
      httpPort: 8080,
      grpcHost: "127.0.0.1",
      grpcPort: 50051,
      daemonUrl: "http://127.0.0.1:50051",
    });
  });

  it("take CONSENT_HTTP_HOST, CONSENT_GRPC_HOST and CONSENT_DATA_DIR as set", () => {
    const config = loadConfig({
      CONSENT_HTTP_HOST: "0.0.0.0",
      CONSENT_GRPC_HOST: "::",
      CONSENT_DATA_DIR: "/var/lib/consent",
    });
    expect([config.httpHost, config.grpcHost, config.dataDir]).toEqual([
      "0.0.0.0",
      "::",
      "/var/lib/consent",
    ]);
  });

  it("take an IPv6 listen address in brackets as the address, and refuse white space in one", () => {
    const config = loadConfig({ CONSENT_HTTP_HOST: "[::1]", CONSENT_GRPC_HOST: "[::]" });
    expect([config.httpHost, config.grpcHost]).toEqual(["::1", "::"]);
    expect(configErrorOf({ CONSENT_HTTP_HOST: " 0.0.0.0" }).message).toBe(
      'CONSENT_HTTP_HOST must be a host name or an IP address such as 127.0.0.1 or ::1, without white space, not " 0.0.0.0"',
    );
    expect(configErrorOf({ CONSENT_GRPC_HOST: "[not an address]" }).message).toMatch(
      /^CONSENT_GRPC_HOST must be a host name/,
    );
  });

  it("read an empty CONSENT_DATA_DIR as unset, ./data, as every variable's empty value is", () => {
    expect(loadConfig({ CONSENT_DATA_DIR: "" }).dataDir).toBe(path.resolve("data"));
  });

  it("refuse a data directory that is blank or begins or ends with white space", () => {
    expect(configErrorOf({ CONSENT_DATA_DIR: " " }).message).toBe(
      'CONSENT_DATA_DIR is blank (" "): unset it for ./data, or name a directory',
    );
    expect(configErrorOf({ CONSENT_DATA_DIR: " /var/lib/consent" }).message).toBe(
      'CONSENT_DATA_DIR begins or ends with white space (" /var/lib/consent"), which would name another directory than meant: remove it',
    );
  });

  it("take the HTTP port from CONSENT_HTTP_PORT over PORT when both are set", () => {
    expect(loadConfig({ CONSENT_HTTP_PORT: "8082", PORT: "8081" }).httpPort).toBe(8082);
    expect(configErrorOf({ CONSENT_HTTP_PORT: "http", PORT: "8081" }).message).toBe(
      'CONSENT_HTTP_PORT must be a port number from 0 to 65535, not "http"',
    );
  });
});

describe("CONSENT_WEBHOOK_LEASE_MS", () => {
  it("is unset by default (the dispatcher's 60 s) and read as whole milliseconds", () => {
    expect(loadConfig({}).webhookLeaseMs).toBeUndefined();
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "" }).webhookLeaseMs).toBeUndefined();
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "2000" }).webhookLeaseMs).toBe(2000);
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "1000" }).webhookLeaseMs).toBe(1000);
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "3600000" }).webhookLeaseMs).toBe(3_600_000);
  });

  it("refuses anything but a whole number from 1000 to 3600000, naming the variable", () => {
    for (const value of ["999", "3600001", "2s", "1.5e3", "-5000"]) {
      expect(() => loadConfig({ CONSENT_WEBHOOK_LEASE_MS: value })).toThrow(
        /^CONSENT_WEBHOOK_LEASE_MS must be a whole number of milliseconds from 1000 to 3600000/,
      );
    }
  });
});

describe("CONSENT_DRAIN_TIMEOUT_MS", () => {
  it("is 8 s by default, inside docker stop's 10 s, and read as whole milliseconds", () => {
    expect(loadConfig({}).drainTimeoutMs).toBe(8_000);
    expect(loadConfig({ CONSENT_DRAIN_TIMEOUT_MS: "" }).drainTimeoutMs).toBe(8_000);
    expect(loadConfig({ CONSENT_DRAIN_TIMEOUT_MS: "1000" }).drainTimeoutMs).toBe(1_000);
    expect(loadConfig({ CONSENT_DRAIN_TIMEOUT_MS: " 25000 " }).drainTimeoutMs).toBe(25_000);
    expect(loadConfig({ CONSENT_DRAIN_TIMEOUT_MS: "600000" }).drainTimeoutMs).toBe(600_000);
  });

  it("refuses anything but a whole number from 1000 to 600000, naming the variable and the value", () => {
    for (const value of ["0", "999", "-2000", "600001", "86400000", "10s", "2e3", "8000.5"]) {
      expect(configErrorOf({ CONSENT_DRAIN_TIMEOUT_MS: value }).message).toBe(
        `CONSENT_DRAIN_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 600000, not "${value}"`,
      );
    }
  });
});

describe("CONSENT_MONGODB_TIMEOUT_MS", () => {
  it("is unset by default (the MongoDB store's 10 s) and read as whole milliseconds", () => {
    expect(loadConfig({}).mongoTimeoutMs).toBeUndefined();
    expect(loadConfig({ CONSENT_MONGODB_TIMEOUT_MS: "" }).mongoTimeoutMs).toBeUndefined();
    expect(loadConfig({ CONSENT_MONGODB_TIMEOUT_MS: "1000" }).mongoTimeoutMs).toBe(1_000);
    expect(loadConfig({ CONSENT_MONGODB_TIMEOUT_MS: "600000" }).mongoTimeoutMs).toBe(600_000);
  });

  it("refuses anything but a whole number from 1000 to 600000, naming the variable", () => {
    for (const value of ["0", "999", "600001", "10s", "1e4"]) {
      expect(() => loadConfig({ CONSENT_MONGODB_TIMEOUT_MS: value })).toThrow(
        /^CONSENT_MONGODB_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 600000/,
      );
    }
  });
});

describe("CONSENT_LOG_READ_TIMEOUT_MS", () => {
  it("is unset by default (the embedded store's 10 s) and read as whole milliseconds", () => {
    expect(loadConfig({}).logReadTimeoutMs).toBeUndefined();
    expect(loadConfig({ CONSENT_LOG_READ_TIMEOUT_MS: "" }).logReadTimeoutMs).toBeUndefined();
    expect(loadConfig({ CONSENT_LOG_READ_TIMEOUT_MS: "1000" }).logReadTimeoutMs).toBe(1_000);
    expect(loadConfig({ CONSENT_LOG_READ_TIMEOUT_MS: "600000" }).logReadTimeoutMs).toBe(600_000);
    for (const value of ["0", "999", "600001", "10s", "1e4"]) {
      expect(() => loadConfig({ CONSENT_LOG_READ_TIMEOUT_MS: value })).toThrow(
        /^CONSENT_LOG_READ_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 600000/,
      );
    }
  });

  it("is refused beside MONGODB_URI, naming the setting that bounds MongoDB's log reads", () => {
    expect(
      configErrorOf({
        MONGODB_URI: "mongodb://127.0.0.1:27017/consent",
        CONSENT_LOG_READ_TIMEOUT_MS: "5000",
      }).message,
    ).toMatch(
      /^CONSENT_LOG_READ_TIMEOUT_MS bounds the embedded store's .* CONSENT_MONGODB_TIMEOUT_MS/,
    );
  });
});

describe("numeric settings", () => {
  it("read ports as decimal whole numbers, spaces around allowed", () => {
    expect(loadConfig({ CONSENT_HTTP_PORT: " 8081 " }).httpPort).toBe(8081);
    expect(loadConfig({ CONSENT_GRPC_PORT: "0" }).grpcPort).toBe(0);
  });

  it("refuse what Number() would accept but is not written as a whole number", () => {
    for (const value of ["0x50", "1e3", "80.0", "65536", "-1", "eighty"]) {
      expect(() => loadConfig({ CONSENT_HTTP_PORT: value })).toThrow(
        `CONSENT_HTTP_PORT must be a port number from 0 to 65535, not "${value}"`,
      );
    }
  });
});

/** The error loadConfig throws for `env`. */
function configErrorOf(env: NodeJS.ProcessEnv): Error {
  try {
    loadConfig(env);
  } catch (error) {
    return error as Error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe("CONSENT_IDENTITY_KEY", () => {
  const key = () => randomBytes(32).toString("base64");

  it("takes one or more base64 keys of 32 bytes, comma-separated, and is unset by default", () => {
    const [current, previous] = [key(), key()];
    expect(loadConfig({}).identityKey).toBeUndefined();
    expect(loadConfig({ CONSENT_IDENTITY_KEY: current }).identityKey).toBe(current);
    expect(loadConfig({ CONSENT_IDENTITY_KEY: `${current}, ${previous}` }).identityKey).toBe(
      `${current}, ${previous}`,
    );
  });

  it("refuses a key that is not the base64 form of 32 bytes, naming the variable and the key's place, never a key", () => {
    const valid = key();
    const cases = [
      ["not-base64", "#1"],
      [randomBytes(16).toString("base64"), "#1"],
      [`${valid},not-base64`, "#2"],
    ] as const;
    for (const [value, place] of cases) {
      const error = configErrorOf({ CONSENT_IDENTITY_KEY: value });
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toMatch(
        new RegExp(
          `^CONSENT_IDENTITY_KEY: identity key ${place} is not the base64 form of 32 bytes`,
        ),
      );
      for (const part of value.split(",")) expect(error.message).not.toContain(part);
    }
    expect(configErrorOf({ CONSENT_IDENTITY_KEY: " , " })).toBeInstanceOf(ConfigError);
  });
});

describe("CONSENT_TRUST_PROXY", () => {
  const accepted = [
    "10.0.0.1",
    "10.0.0.0/8",
    "10.0.0.0/255.0.0.0",
    "2001:db8::/32",
    "::1",
    "loopback",
    "linklocal",
    "uniquelocal",
  ];

  it("takes addresses, CIDRs and the names loopback, linklocal and uniquelocal, each of which the gateway's Fastify accepts", async () => {
    expect(loadConfig({}).trustProxy).toEqual([]);
    const { trustProxy } = loadConfig({ CONSENT_TRUST_PROXY: ` ${accepted.join(" , ")} ` });
    expect(trustProxy).toEqual(accepted);
    const app = fastify({ trustProxy });
    await app.ready();
    await app.close();
  });

  it("refuses an entry that is none of those, naming the variable and the entry", () => {
    for (const entry of [
      "notanip",
      "10.0.0.0/33",
      "0.0.0.0/0",
      "10.0.0.1/x",
      "[::1]",
      "LOOPBACK",
    ]) {
      const error = configErrorOf({ CONSENT_TRUST_PROXY: `127.0.0.1, ${entry}` });
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toMatch(/^CONSENT_TRUST_PROXY: /);
      expect(error.message).toContain(`"${entry}"`);
      expect(() => fastify({ trustProxy: [entry] }).ready()).toThrow();
    }
  });

  it("refuses CONSENT_GEO_HEADER without a trusted proxy, whose header alone it reads", () => {
    expect(configErrorOf({ CONSENT_GEO_HEADER: "CF-IPCountry" }).message).toMatch(
      /^CONSENT_GEO_HEADER is read only from the proxies CONSENT_TRUST_PROXY names/,
    );
    const config = loadConfig({
      CONSENT_GEO_HEADER: "CF-IPCountry",
      CONSENT_TRUST_PROXY: "loopback",
    });
    expect(config.geoHeader).toBe("CF-IPCountry");
  });

  it("refuses a hop count, which would let any client name its own address", () => {
    expect(configErrorOf({ CONSENT_TRUST_PROXY: "1" }).message).toBe(
      "CONSENT_TRUST_PROXY lists proxy addresses or CIDRs, never a hop count",
    );
  });
});

describe("CONSENT_LOADER_CACHE_MB", () => {
  it("is 256 MB unless set, and anything but a whole number from 1 to 1000000 is refused", () => {
    expect(loadConfig({}).loaderCacheMb).toBe(256);
    expect(loadConfig({ CONSENT_LOADER_CACHE_MB: "1" }).loaderCacheMb).toBe(1);
    expect(loadConfig({ CONSENT_LOADER_CACHE_MB: " 1024 " }).loaderCacheMb).toBe(1024);
    for (const value of ["0", "-1", "1.5", "256MB", "1e3", "1000001"]) {
      expect(configErrorOf({ CONSENT_LOADER_CACHE_MB: value }).message).toBe(
        `CONSENT_LOADER_CACHE_MB must be a whole number of megabytes from 1 to 1000000, not "${value}"`,
      );
    }
  });
});

describe("CONSENT_MIN_FREE_MB", () => {
  it("is 64 MB unless set, 0 turns the disk guard off, and anything else is refused", () => {
    expect(loadConfig({}).minFreeMb).toBe(64);
    expect(loadConfig({ CONSENT_MIN_FREE_MB: "0" }).minFreeMb).toBe(0);
    expect(loadConfig({ CONSENT_MIN_FREE_MB: "2048" }).minFreeMb).toBe(2048);
    for (const value of ["-1", "1.5", "64MB", "100000001"]) {
      expect(configErrorOf({ CONSENT_MIN_FREE_MB: value }).message).toBe(
        `CONSENT_MIN_FREE_MB must be a whole number of megabytes from 0 to 100000000, not "${value}"`,
      );
    }
  });
});

describe("URLs and the log level", () => {
  it("takes only http(s) URLs for the daemon and the public base, naming the variable", () => {
    expect(loadConfig({ CONSENT_DAEMON_URL: "https://daemon.internal:50051/" }).daemonUrl).toBe(
      "https://daemon.internal:50051",
    );
    // `localhost:50051` parses as a URL of scheme "localhost:", which no HTTP client can call.
    for (const value of ["localhost:50051", "grpc://127.0.0.1:50051", "ftp://127.0.0.1:50051"]) {
      expect(configErrorOf({ CONSENT_DAEMON_URL: value }).message).toBe(
        `CONSENT_DAEMON_URL must be an http:// or https:// URL such as http://127.0.0.1:50051, not "${value}"`,
      );
    }
    // The daemon serves at the root: a stand-alone gateway with a path prefix would have every
    // call answered 404. The message never repeats the value, which may hold a password.
    for (const value of [
      "http://daemon:50051/api",
      "http://daemon:50051/#x",
      "http://u:pw@daemon",
      // An empty query or fragment is kept by the URL, and would be by every call's path.
      "http://daemon:50051/?",
      "http://daemon:50051#",
    ]) {
      const message = configErrorOf({ CONSENT_DAEMON_URL: value }).message;
      expect(message).toBe(
        "CONSENT_DAEMON_URL must be the daemon's address alone (scheme, host and port, such as http://127.0.0.1:50051): the daemon serves at the root, so a path, query, fragment or user name has no place in it",
      );
    }
    // The public base URL may have a path: a proxy can serve the gateway under one.
    expect(loadConfig({ CONSENT_BASE_URL: "https://shop.example/consent/" }).baseUrl).toBe(
      "https://shop.example/consent",
    );
    // Loader tags and preference links append a path to it: a query, a fragment or user info
    // would break them or hand a password to every site. Each part is named; the value is not.
    for (const [value, parts] of [
      ["https://shop.example/consent?utm=1", "a query string (?...)"],
      ["https://shop.example/?", "a query string (?...)"],
      ["https://shop.example/#top", "a fragment (#...)"],
      ["https://operator:pw@shop.example", "user info (user:password@)"],
      [
        "https://operator:pw@shop.example/c?a#b",
        "a query string (?...), a fragment (#...) and user info (user:password@)",
      ],
    ]) {
      expect(configErrorOf({ CONSENT_BASE_URL: value }).message).toBe(
        `CONSENT_BASE_URL carries ${parts}: loader tags and preference links are built by appending a path to it, so give scheme, host, port and an optional path alone, such as https://consent.example.com/consent`,
      );
    }
    // A refused URL is repeated without its user info.
    expect(configErrorOf({ CONSENT_BASE_URL: "ftp://operator:pw@shop.example" }).message).toBe(
      'CONSENT_BASE_URL must be an http:// or https:// URL such as https://consent.example.com, not "ftp://***@shop.example"',
    );
    // The example is a public address, not the daemon's gRPC one.
    expect(configErrorOf({ CONSENT_BASE_URL: "localhost:8080" }).message).toBe(
      'CONSENT_BASE_URL must be an http:// or https:// URL such as https://consent.example.com, not "localhost:8080"',
    );
    expect(configErrorOf({ CONSENT_BASE_URL: "ftp://shop.example" }).message).toMatch(
      /^CONSENT_BASE_URL must be an http:\/\/ or https:\/\/ URL/,
    );
    // A port past 65535 is named as the mistake, not the URL's form.
    expect(configErrorOf({ CONSENT_DAEMON_URL: "http://127.0.0.1:99999" }).message).toBe(
      'CONSENT_DAEMON_URL names port 99999 ("http://127.0.0.1:99999"); a port is a number from 1 to 65535',
    );
  });

  it("names PORT when the HTTP port came from it", () => {
    expect(loadConfig({ PORT: "8081" }).httpPort).toBe(8081);
    expect(configErrorOf({ PORT: "http" }).message).toBe(
      'PORT must be a port number from 0 to 65535, not "http"',
    );
  });

  it("takes pino's levels only", () => {
    expect(loadConfig({ CONSENT_LOG_LEVEL: "warn" }).logLevel).toBe("warn");
    expect(loadConfig({}).logLevel).toBe("info");
    expect(configErrorOf({ CONSENT_LOG_LEVEL: "verbose" }).message).toBe(
      'CONSENT_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, not "verbose"',
    );
  });
});
