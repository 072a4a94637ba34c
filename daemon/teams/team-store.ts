/** Plans of decisions §2, in order of size. */
export const PLANS = ["free", "starter", "professional", "business", "enterprise"] as const;
export type Plan = (typeof PLANS)[number];

/** A team owns banners, keys and sessions; its plan sets limits and features. */
export interface Team {
  id: string;
  name: string;
  /** One of PLANS for teams made by this service; an unmapped value falls back to free limits. */
  plan: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Storage port for teams. */
export interface TeamStore {
  /** Stores a new team; ids are UUIDs made by the service. */
  insert(team: Team): Promise<void>;
  get(id: string): Promise<Team | null>;
  /** Every team, oldest first. */
  list(): Promise<Team[]>;
  /** Changes the plan and returns the team after the change; null when there is no such team. */
  setPlan(id: string, plan: string, updatedAt: Date): Promise<Team | null>;
}
