import type { ReadCancellation } from "#daemon/store/store.js";

/** A consent category offered by a banner. */
export interface ConsentCategory {
  name: string;
  required: boolean;
  label: string;
  description: string;
  services: string[];
}

export interface CategoryTexts {
  label: string;
  description: string;
}

/** Banner bodies carry a whole configuration (texts in many languages); 256 KB is ample. */
export const BANNER_BODY_LIMIT = 256 * 1024;

/** The visible strings of a banner in one language; empty strings fall back to English. */
export interface BannerTexts {
  title: string;
  description: string;
  acceptAll: string;
  rejectAll: string;
  customize: string;
  save: string;
  privacyPolicyUrl: string;
  /** The text of the link to privacyPolicyUrl; absent in banners stored before it existed. */
  privacyPolicyLabel?: string;
  alwaysOnLabel?: string;
  /** The words before a category's services; absent in banners stored before it existed. */
  servicesLabel?: string;
  categories: Record<string, CategoryTexts>;
}

export type JurisdictionMode = "opt_in" | "opt_out" | "notice";

export interface JurisdictionRule {
  id: string;
  countries: string[];
  regions: string[];
  mode: JurisdictionMode;
}

/** spec 2.1: the layouts and positions of a banner; decisions §3: what a log keeps of the page. */
export const LAYOUTS = ["banner", "modal", "inline"] as const;
export const POSITIONS = ["top", "bottom", "center"] as const;
export const TELEMETRY_LEVELS = ["none", "origin", "path"] as const;

export type TelemetryLevel = (typeof TELEMETRY_LEVELS)[number];

/** A complete banner configuration: every field is filled (defaults of spec 2.1, decisions §3). */
export interface BannerConfiguration {
  layout: (typeof LAYOUTS)[number];
  position: (typeof POSITIONS)[number];
  primaryColor: string;
  secondaryColor: string;
  textColor: string;
  accentColor: string;
  categories: ConsentCategory[];
  texts: Record<string, BannerTexts>;
  jurisdictionRules: JurisdictionRule[];
  telemetryLevel: TelemetryLevel;
  additionalDomains: string[];
}

export interface Compliance {
  gdpr: boolean;
  ccpa: boolean;
  lgpd: boolean;
}

/** The production environment of a banner: what the loader serves (decisions §3). */
export interface ProductionEnvironment {
  revision: number;
  configuration: BannerConfiguration;
  publishedAt: Date;
}

/**
 * A banner with its domain registration (`domain`, plus the production configuration's
 * `additionalDomains`) and its production environment, stored as one record so that creation
 * writes all three atomically (spec 4.3).
 */
export interface BannerRecord {
  id: string;
  /** Public Banner ID; unique, never equal to id. */
  publicId: string;
  teamId: string;
  name: string;
  /** Normalized https:// URL of the banner's site. */
  domain: string;
  isActive: boolean;
  compliance: Compliance;
  /** The configuration being edited; publish copies it to production. */
  draft: BannerConfiguration;
  production: ProductionEnvironment;
  createdAt: Date;
  updatedAt: Date;
  /** Optimistic-concurrency counter: 1 on creation, +1 per replace. */
  version: number;
}

/** Storage port for banners. */
export interface BannerStore {
  /**
   * Stores a new banner together with its domain registration and production environment in one
   * atomic write, and returns true: either all of it is visible afterwards or none of it. id and
   * publicId are unique (DuplicateKeyError). With `maxPerTeam`, stores nothing and returns false
   * when the team already has that many banners. The count and the insert are one atomic step:
   * however many inserts of one team race, at most maxPerTeam banners are stored, and a racer is
   * refused only when they are. An adapter that settles races by trying again may give up on a
   * long run of them (InsertContendedError).
   */
  insert(banner: BannerRecord, maxPerTeam?: number): Promise<boolean>;
  /** A banner of the team by internal id; null when absent or owned by another team. */
  get(teamId: string, id: string): Promise<BannerRecord | null>;
  /** A banner by public id, whatever its team or state. */
  getByPublicId(publicId: string): Promise<BannerRecord | null>;
  /** A team's banners, oldest first; `cancel` stops the read (ReadCancellation). */
  listByTeam(teamId: string, cancel?: ReadCancellation): Promise<BannerRecord[]>;
  /**
   * Replaces the stored banner with `next` when the stored version equals `expectedVersion`
   * (next.version must be expectedVersion + 1). Returns false when the stored version differs or
   * the banner is gone. Under concurrent calls with the same expectedVersion exactly one succeeds.
   */
  replace(next: BannerRecord, expectedVersion: number): Promise<boolean>;
}
