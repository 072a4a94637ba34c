import { toJson } from "@bufbuild/protobuf";
import { z } from "zod";
import {
  type ConfigurationInput,
  configurationInput,
} from "#daemon/banners/banner-configuration.js";
import { configurationMessage } from "#daemon/banners/banner-messages.js";
import { BANNER_BODY_LIMIT, type BannerConfiguration } from "#daemon/banners/banner-store.js";
import {
  hostOf,
  normalizeDomain,
  notPublicSuffix,
  PUBLIC_SUFFIX_MESSAGE,
} from "#daemon/banners/domains.js";
import { DomainError, type Violation } from "#daemon/errors.js";
import { displayName } from "#daemon/validation/rules.js";
import { parseOrThrow } from "#daemon/validation/violations.js";
import { BannerConfigurationSchema } from "#gen/consent/v1/banner_pb.js";

/**
 * The most a banner's configuration may weigh as the API writes it: what a body may carry, less
 * room for the rest of the Banner shape (ids, a name of up to 255 characters, domain, dates). So
 * a banner as read can always be sent back in a PATCH (docs/behaviour.md), though each PATCH
 * within the body limit could otherwise add texts and categories past it.
 */
export const CONFIGURATION_LIMIT = BANNER_BODY_LIMIT - 8 * 1024;

/**
 * Banners one team may have (docs/behaviour.md). The list answers every banner whole (spec 4.2
 * has no pages), so this count times the body bound bounds one list: 250 × 256 KB, about 64 MB,
 * where a thousand banners of 233 KB made a 250 MB answer that took 24 s and four lists at once
 * a daemon's whole heap. Creating one more is refused with 409 failed_precondition.
 * Raise it freely; lowering it needs the MongoDB `slot`s at or above the new value renumbered
 * first, or racing creates could pass the new maximum (mongo-writes.ts freeSlot).
 */
export const MAX_BANNERS_PER_TEAM = 250;

const name = displayName(255);
const domain = z
  .string()
  .refine(
    (value) => hostOf(value) !== null,
    "must be a valid domain or localhost, e.g. example.com",
  )
  .refine(notPublicSuffix, PUBLIC_SUFFIX_MESSAGE);

/** spec 4.3: the create body. */
const createBody = z.strictObject({
  name,
  domain,
  configuration: configurationInput,
  gdprEnabled: z.boolean().optional(),
  ccpaEnabled: z.boolean().optional(),
  lgpdEnabled: z.boolean().optional(),
});

/** Fields of the Banner shape a client may send back unchanged in a PATCH; they are ignored. */
const readOnly = z.unknown().optional();

/** decisions §3: the PATCH body; every field optional. */
const updateBody = z
  .strictObject({
    name: name.optional(),
    domain: domain.optional(),
    configuration: configurationInput.optional(),
    gdprEnabled: z.boolean().optional(),
    ccpaEnabled: z.boolean().optional(),
    lgpdEnabled: z.boolean().optional(),
    compliance: z
      .strictObject({
        gdpr: z.boolean().optional(),
        ccpa: z.boolean().optional(),
        lgpd: z.boolean().optional(),
      })
      .optional(),
    isActive: z.boolean().optional(),
    id: readOnly,
    publicId: readOnly,
    teamId: readOnly,
    createdAt: readOnly,
    updatedAt: readOnly,
    revision: readOnly,
    publishedAt: readOnly,
    hasUnpublishedChanges: readOnly,
  })
  // Checked even when another field failed, so one answer lists every violation.
  .superRefine(oneValuePerFlag, {
    when: (payload) => typeof payload.value === "object" && payload.value !== null,
  });

const FLAGS = ["gdpr", "ccpa", "lgpd"] as const;

/**
 * `ccpaEnabled` and `compliance.ccpa` spell one flag (the Banner shape's `compliance` may come
 * back in a PATCH): both may be sent, but not with different values, or one would be ignored.
 */
function oneValuePerFlag(
  body: Partial<Record<`${(typeof FLAGS)[number]}Enabled`, boolean>> & {
    compliance?: Partial<Record<(typeof FLAGS)[number], boolean>>;
  },
  ctx: z.RefinementCtx,
): void {
  for (const flag of FLAGS) {
    const enabled = body[`${flag}Enabled`];
    const mirrored = body.compliance?.[flag];
    // The values as sent: either spelling may itself have failed its own rule.
    if (typeof enabled === "boolean" && typeof mirrored === "boolean" && enabled !== mirrored) {
      ctx.addIssue({
        code: "custom",
        path: ["compliance", flag],
        message: `must equal ${flag}Enabled when both are sent`,
      });
    }
  }
}

export interface BannerCreation {
  name: string;
  domain: string;
  configuration: ConfigurationInput;
  compliance: { gdpr: boolean; ccpa: boolean; lgpd: boolean };
}

export interface BannerUpdate {
  name?: string;
  domain?: string;
  configuration?: ConfigurationInput;
  compliance: { gdpr?: boolean; ccpa?: boolean; lgpd?: boolean };
  isActive?: boolean;
}

/** Validates a create body; compliance flags default to GDPR on, CCPA and LGPD off (spec 4.3). */
export function readBannerCreation(body: unknown): BannerCreation {
  const value = parseOrThrow(createBody, body, bannerValidationFailed);
  return {
    name: value.name,
    domain: normalizeDomain(value.domain) as string,
    configuration: value.configuration,
    compliance: {
      gdpr: value.gdprEnabled ?? true,
      ccpa: value.ccpaEnabled ?? false,
      lgpd: value.lgpdEnabled ?? false,
    },
  };
}

/** Validates a PATCH body; `gdprEnabled` and `compliance.gdpr` are two spellings of one flag. */
export function readBannerUpdate(body: unknown): BannerUpdate {
  const value = parseOrThrow(updateBody, body, bannerValidationFailed);
  return {
    name: value.name,
    domain: value.domain === undefined ? undefined : (normalizeDomain(value.domain) as string),
    configuration: value.configuration,
    compliance: {
      gdpr: value.gdprEnabled ?? value.compliance?.gdpr,
      ccpa: value.ccpaEnabled ?? value.compliance?.ccpa,
      lgpd: value.lgpdEnabled ?? value.compliance?.lgpd,
    },
    isActive: value.isActive,
  };
}

/**
 * Texts sent for a category must name one of the banner's categories: those sent in the same
 * configuration, else the banner's current ones (a misspelt name would otherwise be kept and
 * never shown). Texts already stored (`stored`, the draft's) pass as they are, so a banner's
 * configuration can always be sent back: a PATCH that changes only the categories keeps them.
 */
export function checkCategoryTexts(
  configuration: BannerConfiguration,
  input: ConfigurationInput,
  stored: BannerConfiguration["texts"],
): void {
  const names = new Set(configuration.categories.map((category) => category.name));
  const violations: Violation[] = [];
  for (const [language, texts] of Object.entries(input.texts ?? {})) {
    const kept = stored[language]?.categories ?? {};
    const unknown = Object.keys(texts.categories ?? {}).filter(
      (name) => !names.has(name) && !Object.hasOwn(kept, name),
    );
    if (unknown.length === 0) continue;
    const field = `configuration.texts.${language}.categories`;
    const named = unknown.map((name) => {
      const meant = configuration.categories.find(
        (category) => category.name.toLowerCase() === name.toLowerCase(),
      );
      return meant ? `${name} (the category is ${meant.name})` : name;
    });
    violations.push({
      field,
      message: `${field} names no category of the banner: ${named.join(", ")}`,
    });
  }
  if (violations.length > 0) throw bannerValidationFailed(violations);
}

/** A configuration as the API writes it must stay within CONFIGURATION_LIMIT. */
export function checkConfigurationSize(configuration: BannerConfiguration): void {
  const written = toJson(BannerConfigurationSchema, configurationMessage(configuration), {
    alwaysEmitImplicit: true,
  });
  const bytes = Buffer.byteLength(JSON.stringify(written));
  if (bytes <= CONFIGURATION_LIMIT) return;
  const kb = (value: number) => Math.ceil(value / 1024);
  throw bannerValidationFailed([
    {
      field: "configuration",
      message: `configuration must be at most ${kb(CONFIGURATION_LIMIT)} KB as JSON, so that the banner can be sent back whole; with this change it would be ${kb(bytes)} KB`,
    },
  ]);
}

/** spec 7: a banner validation failure is a 400 whose `error` is a message and has no code. */
function bannerValidationFailed(violations: Violation[]): DomainError {
  const first = violations[0]?.message ?? "invalid banner";
  return new DomainError("invalid", "", `Validation failed: ${first}`, { details: violations });
}
