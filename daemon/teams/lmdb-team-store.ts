import type { Database } from "lmdb";
import { DuplicateKeyError } from "#daemon/store/store.js";
import type { Team, TeamStore } from "#daemon/teams/team-store.js";

/** The named databases of the team store: teams by id. */
export interface LmdbTeamDatabases {
  teams: Database<Team, string>;
}

/**
 * TeamStore over LMDB. Every read-then-write runs inside one write transaction, which LMDB
 * serialises across threads and processes sharing the data directory.
 */
export function createLmdbTeamStore({ teams }: LmdbTeamDatabases): TeamStore {
  return {
    async insert(team) {
      await teams.transaction(() => {
        // Checked before any write: lmdb does not roll back a callback that throws.
        if (teams.doesExist(team.id)) throw new DuplicateKeyError("team id");
        teams.putSync(team.id, team);
      });
    },
    async get(id) {
      return teams.get(id) ?? null;
    },
    async list() {
      // Few teams exist; sorting them here spares an index kept in step with every insert. The
      // sort is stable, so teams created in the same millisecond keep the range's order: their
      // ids' bytes, as MongoDB orders `_id`, whatever the process's locale.
      return Array.from(teams.getRange(), ({ value }) => value).sort(
        (a, b) => a.createdAt.getTime() - b.createdAt.getTime(),
      );
    },
    setPlan(id, plan, updatedAt) {
      return teams.transaction(() => {
        const team = teams.get(id);
        if (!team) return null;
        const next: Team = { ...team, plan, updatedAt };
        teams.putSync(id, next);
        return next;
      });
    },
  };
}
