import type { Collection, IndexDescription, WithId } from "mongodb";
import { insertUnique } from "#daemon/store/mongo-writes.js";
import type { Team, TeamStore } from "#daemon/teams/team-store.js";

/** A team as stored in MongoDB: `_id` is the team's UUID, so no ObjectId ever surfaces. */
export type TeamDocument = Omit<Team, "id"> & { _id: string };

/** TeamStore over the `teams` collection. */
export class MongoTeamStore implements TeamStore {
  /** list() sorts oldest first; `_id` breaks ties between teams created in the same millisecond. */
  static readonly indexes: IndexDescription[] = [
    { key: { createdAt: 1, _id: 1 }, name: "teams_by_creation" },
  ];

  constructor(private readonly collection: Collection<TeamDocument>) {}

  async insert(team: Team): Promise<void> {
    await insertUnique(this.collection, toDocument(team), "team");
  }

  async get(id: string): Promise<Team | null> {
    const document = await this.collection.findOne({ _id: id });
    return document && toTeam(document);
  }

  async list(): Promise<Team[]> {
    const documents = await this.collection.find({}).sort({ createdAt: 1, _id: 1 }).toArray();
    return documents.map(toTeam);
  }

  async setPlan(id: string, plan: string, updatedAt: Date): Promise<Team | null> {
    const document = await this.collection.findOneAndUpdate(
      { _id: id },
      { $set: { plan, updatedAt } },
      { returnDocument: "after" },
    );
    return document && toTeam(document);
  }
}

function toDocument(team: Team): TeamDocument {
  return {
    _id: team.id,
    name: team.name,
    plan: team.plan,
    createdAt: team.createdAt,
    updatedAt: team.updatedAt,
  };
}

function toTeam(document: WithId<TeamDocument>): Team {
  return {
    id: document._id,
    name: document.name,
    plan: document.plan,
    createdAt: document.createdAt,
    updatedAt: document.updatedAt,
  };
}
