import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";
import type { Team } from "#daemon/teams/team-store.js";

function aTeam(createdAt: Date, overrides: Partial<Team> = {}): Team {
  return {
    id: randomUUID(),
    name: "Acme",
    plan: "free",
    createdAt,
    updatedAt: createdAt,
    ...overrides,
  };
}

/** The TeamStore promises (daemon/teams/team-store.ts), for any adapter. */
export function describeTeamStoreContract(openStore: OpenStore): void {
  describe("TeamStore contract", () => {
    const store = useFreshStore(openStore);
    const now = new Date();

    it("returns an inserted team by id, with dates as Date objects", async () => {
      const team = aTeam(now);
      await store().teams.insert(team);
      const found = await store().teams.get(team.id);
      expect(found).toEqual(team);
      expect(found?.createdAt).toBeInstanceOf(Date);
    });

    it("returns null for an unknown id", async () => {
      expect(await store().teams.get(randomUUID())).toBeNull();
    });

    it("rejects a second insert with the same id", async () => {
      const team = aTeam(now);
      await store().teams.insert(team);
      await expect(store().teams.insert({ ...team, name: "Other" })).rejects.toBeInstanceOf(
        DuplicateKeyError,
      );
      expect((await store().teams.get(team.id))?.name).toBe("Acme");
    });

    it("lists every team oldest first, whatever the insertion order", async () => {
      const teams = [aTeam(shifted(now, 2 * MINUTE)), aTeam(now), aTeam(shifted(now, MINUTE))];
      for (const team of teams) await store().teams.insert(team);
      const listed = await store().teams.list();
      expect(listed.map((t) => t.id)).toEqual([teams[1], teams[2], teams[0]].map((t) => t?.id));
    });

    it("changes the plan and returns the team after the change", async () => {
      const team = aTeam(now);
      await store().teams.insert(team);
      const updatedAt = shifted(now, MINUTE);
      const changed = await store().teams.setPlan(team.id, "business", updatedAt);
      expect(changed).toEqual({ ...team, plan: "business", updatedAt });
      expect(await store().teams.get(team.id)).toEqual(changed);
    });

    it("returns null when setting the plan of an unknown team", async () => {
      expect(await store().teams.setPlan(randomUUID(), "starter", now)).toBeNull();
    });

    it("returns fresh records that callers may mutate", async () => {
      const team = aTeam(now);
      await store().teams.insert(team);
      team.name = "Mutated after insert";
      const found = await store().teams.get(team.id);
      if (found) found.name = "Mutated after get";
      expect((await store().teams.get(team.id))?.name).toBe("Acme");
    });
  });
}
