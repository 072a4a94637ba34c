import type {
  Document,
  MongoClient,
  ServerHeartbeatFailedEvent,
  ServerHeartbeatSucceededEvent,
} from "mongodb";
import { messageOf } from "#daemon/errors.js";

/** What a server is, by its answer to hello. */
export type ServerKind = "standalone" | "router" | "uninitiated" | "primary" | "member";

/** A server's kind from its hello: a member of a replica set names the set (`setName`). */
export function serverKind(hello: Document): ServerKind {
  if (hello.msg === "isdbgrid") return "router";
  if (hello.isreplicaset === true) return "uninitiated";
  if (typeof hello.setName !== "string") return "standalone";
  return hello.isWritablePrimary === true || hello.ismaster === true ? "primary" : "member";
}

interface ServerSeen {
  address: string;
  kind: ServerKind;
  setName: string | undefined;
  /** The primary a member names (hello's `primary`): the set has one, as the member sees it. */
  primary: string | undefined;
}

/** What each server told the driver's handshakes and heartbeats while a start connected. */
export interface ServersSeen {
  /** The latest answer of each server, by address. */
  readonly servers: Map<string, ServerSeen>;
  /** The latest failure of each server's handshake or heartbeat, by address. */
  readonly failures: Map<string, string>;
  /** Stops recording (the start is over). */
  stop(): void;
}

/**
 * Records what the servers of MONGODB_URI say they are while a start connects: the driver drops a
 * server that does not fit the deployment the URI names (a standalone server under
 * `replicaSet=`, a member of another set) from its topology, and its description with it, and
 * reports only that no server was found in time, as if none had answered. Its heartbeats' replies
 * still say what each server is.
 */
export function watchServers(client: MongoClient): ServersSeen {
  const servers = new Map<string, ServerSeen>();
  const failures = new Map<string, string>();
  const record = ({ connectionId: address, reply }: ServerHeartbeatSucceededEvent) => {
    const setName = typeof reply.setName === "string" ? reply.setName : undefined;
    const primary = typeof reply.primary === "string" ? reply.primary : undefined;
    servers.set(address, { address, kind: serverKind(reply), setName, primary });
  };
  const recordFailure = ({ connectionId: address, failure }: ServerHeartbeatFailedEvent) => {
    failures.set(address, messageOf(failure));
  };
  client.on("serverHeartbeatSucceeded", record);
  client.on("serverHeartbeatFailed", recordFailure);
  return {
    servers,
    failures,
    stop: () => {
      client.off("serverHeartbeatSucceeded", record);
      client.off("serverHeartbeatFailed", recordFailure);
    },
  };
}

/**
 * Why a start found no server to use although servers answered, as one line saying what to do;
 * undefined when none answered (the network, the host list) or nothing here explains it.
 * `replicaSet` is the set MONGODB_URI names, `selectionMs` how long the start looked.
 *
 * A deployment moved between a standalone server and a replica set meets these: a URI still
 * naming the set in front of the server restarted standalone (a member restarted so for
 * maintenance must not take the service's writes, which would never reach the set), a server
 * restarted with `--replSet` whose set was never initiated, or the set's name changed.
 */
export function topologyMismatch(
  seen: ServersSeen,
  replicaSet: string | undefined,
  selectionMs: number,
): string | undefined {
  const servers = [...seen.servers.values()];
  const standalone = servers.find((server) => server.kind === "standalone");
  if (standalone) {
    const named = replicaSet
      ? `MONGODB_URI names the replica set ${replicaSet} (replicaSet=${replicaSet})`
      : "MONGODB_URI names several hosts, as of a replica set";
    const restart = replicaSet
      ? ` with --replSet ${replicaSet}`
      : " as a member of its replica set";
    return `MongoDB at ${standalone.address} is a standalone server, but ${named}: restart it${restart} (a member run standalone for maintenance must not take the service's writes), or, if it is to run standalone from now on, name it alone in MONGODB_URI without replicaSet`;
  }
  const otherSet = servers.find(
    (server) =>
      server.setName !== undefined && replicaSet !== undefined && server.setName !== replicaSet,
  );
  if (otherSet) {
    return `MongoDB at ${otherSet.address} is a member of the replica set ${otherSet.setName}, but MONGODB_URI names ${replicaSet} (replicaSet=${replicaSet}): set replicaSet=${otherSet.setName} in MONGODB_URI, or name the members of ${replicaSet} in it`;
  }
  const uninitiated = servers.find((server) => server.kind === "uninitiated");
  if (uninitiated) return uninitiatedMember(uninitiated.address);
  const members = servers.filter((server) => server.kind === "member");
  if (members.length > 0 && !servers.some((server) => server.kind === "primary")) {
    const set = replicaSet ?? members[0]?.setName ?? "";
    // A member that names a primary which never answered: the set has one, out of this start's
    // reach at the address the set's configuration gives it (a container's name, say), and no
    // election will change that.
    // The driver keys servers by their address in lower case.
    const named = members.find(
      (member) => member.primary && !seen.servers.has(member.primary.toLowerCase()),
    );
    if (named?.primary) {
      const failure = seen.failures.get(named.primary.toLowerCase());
      return `MongoDB replica set ${set} names ${named.primary} as its primary (so say its members at ${members.map((member) => member.address).join(",")}), but ${named.primary} did not answer within ${selectionMs / 1000} s${failure ? `: ${failure}` : ""}; the service reaches each member at the address the set's configuration gives it (rs.conf()), so ${named.primary} must resolve and be reachable from here`;
    }
    return `MongoDB replica set ${set} has no primary within ${selectionMs / 1000} s: its members at ${members.map((member) => member.address).join(",")} answer, none as primary (an election under way, or too few members up to elect one); start again once one is primary`;
  }
  return undefined;
}

/**
 * A start that reached its one server directly (`directConnection=true`) but found it a replica
 * set member without a configuration: the driver lets it be selected, and every read and write
 * would fail. Undefined otherwise.
 */
export function connectedToUninitiatedMember(seen: ServersSeen): string | undefined {
  const servers = [...seen.servers.values()];
  const only = servers.length === 1 ? servers[0] : undefined;
  return only?.kind === "uninitiated" ? uninitiatedMember(only.address) : undefined;
}

function uninitiatedMember(address: string): string {
  return `MongoDB at ${address} runs as a replica set member (--replSet) whose set has not been initiated: run rs.initiate() in mongosh on it (once, on one member), or restart it without --replSet, then start again`;
}

/**
 * What a start on a standalone server (no replica set) says once: the service runs there
 * (README, "MongoDB"), writes journaled as on a set, but an outage of the one server stops it,
 * its disk holds the only copy, and the one transaction the service runs (a subject state moved
 * under the current identity key) is left out, so the state is updated where it is. A replica
 * set of one member has transactions; one of three also failover and copies.
 */
export function standaloneWarning(address: string): string {
  return `MongoDB at ${address} is a standalone server, not a replica set: the service runs on it, with no failover (while it is down or restarting every call answers 503 unavailable) and no second copy of the records (a lost disk loses every write since the last backup), and a subject state found under an older identity key is updated where it is, not moved under the current key in a transaction (README, "Privacy"); for those, restart it with --replSet <name>, run rs.initiate() once in mongosh, add members (rs.add) for failover, and start the service again`;
}
