import {
  ACCEPT_TYPES,
  type AcceptType,
  COLLECTED_VIA,
  CONSENT_STATE_FIELDS,
  type CollectedVia,
  US_OPT_OUT_PURPOSES,
} from "../../daemon/subjects/state-vocabulary.js";
import { isoTimeMs, UUID_PATTERN } from "../../daemon/validation/patterns.js";

/** spec 2.4: the canonical consent state, schemaVersion 2, exactly as PUT state accepts it. */
export interface ConsentState {
  schemaVersion: 2;
  categories: string[];
  revision: number;
  acceptType: AcceptType;
  consentId: string;
  consentTimestamp: string;
  lastConsentTimestamp: string;
  languageCode: string;
  services?: Record<string, string[]>;
  jurisdictions?: string[];
  gpcRespected?: boolean;
  usOptOutChoices?: { saleSharing?: boolean; targetedAdvertising?: boolean };
  isPending?: boolean;
  isDefaultState?: boolean;
  collectedVia?: CollectedVia;
}

/** Chromium caps cookie lifetimes at 400 days; 13 months fits under it. */
const MAX_AGE_SECONDS = 395 * 24 * 3600;

/** One first-party cookie per banner, so two banners on one site never overwrite each other. */
const cookieName = (publicId: string) => `consent_${publicId.slice(0, 8)}`;

const isText = (value: unknown) => typeof value === "string" && value !== "";
/** A date-time as PUT state takes it (RFC 3339), read alike by every browser (isoTimeMs). */
const isTime = (value: unknown) => isText(value) && !Number.isNaN(isoTimeMs(value as string));
const isTexts = (value: unknown) => Array.isArray(value) && value.every(isText);
const optional = (check: (value: unknown) => boolean) => (value: unknown) =>
  value === undefined || check(value);
const isFlag = (value: unknown) => typeof value === "boolean";
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isOneOf = (list: readonly string[], value: unknown) => list.includes(value as string);
const isPurposes = (value: unknown) =>
  isRecord(value) &&
  Object.entries(value).every(([name, flag]) => isOneOf(US_OPT_OUT_PURPOSES, name) && isFlag(flag));
/** `services`: category name → service names. */
const isServices = (value: unknown) => isRecord(value) && Object.values(value).every(isTexts);

/** Each field of spec 2.4 with its check (an optional one passes when absent). */
const FIELD_CHECKS: [string, (value: unknown) => boolean][] = [
  ["schemaVersion", (value) => value === 2],
  ["categories", isTexts],
  [
    "revision",
    (value) => Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 1_000_000,
  ],
  ["acceptType", (value) => isOneOf(ACCEPT_TYPES, value)],
  ["consentId", (value) => UUID_PATTERN.test(String(value))],
  ["consentTimestamp", isTime],
  ["lastConsentTimestamp", isTime],
  ["languageCode", isText],
  ["jurisdictions", optional(isTexts)],
  ["gpcRespected", optional(isFlag)],
  ["isPending", optional(isFlag)],
  ["isDefaultState", optional(isFlag)],
  ["usOptOutChoices", optional(isPurposes)],
  ["services", optional(isServices)],
  ["collectedVia", optional((value) => isOneOf(COLLECTED_VIA, value))],
];

/**
 * Why a value cannot stand as a stored or applied state, or undefined when it can: it must be the
 * canonical state of spec 2.4 as PUT state accepts it, so a state handed in by an integrator or
 * read from a cookie someone edited never reaches the rest of the runtime half-formed (and a
 * later choice is always recordable).
 */
export function stateProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return "it is not an object";
  const unknown = Object.keys(value).find((field) => !isOneOf(CONSENT_STATE_FIELDS, field));
  if (unknown !== undefined) return `${unknown} is not a field of the consent state`;
  const wrong = FIELD_CHECKS.find(([field, check]) => !check(value[field]));
  return wrong && `${wrong[0]} is missing or not valid`;
}

export const isConsentState = (value: unknown): value is ConsentState =>
  stateProblem(value) === undefined;

/**
 * The page's cookies, or undefined where it may not have any: a frame sandboxed without
 * `allow-same-origin` throws on reading them.
 */
function cookieJar(): string | undefined {
  try {
    return document.cookie;
  } catch {
    return undefined;
  }
}

/**
 * Whether the browser keeps no cookies for this page at all (blocked for the site, a frame on
 * another site, a sandboxed frame), as against refusing one state too large for a cookie.
 * Chromium says `cookieEnabled` where it then drops every cookie, so a small one is tried.
 */
export function cookiesBlocked(): boolean {
  if (!navigator.cookieEnabled || !setCookie("consent_probe", "1", 60)) return true;
  setCookie("consent_probe", "", 0);
  return false;
}

/** Sets a first-party cookie (Secure on https, SameSite=Lax); whether the browser kept it. */
function setCookie(name: string, value: string, maxAge: number): boolean {
  const secure = location.protocol === "https:" ? "; secure" : "";
  try {
    // biome-ignore lint/suspicious/noDocumentCookie: the Cookie Store API is async and not in every browser the banner supports.
    document.cookie = `${name}=${value}; path=/; max-age=${maxAge}; samesite=lax${secure}`;
  } catch {
    return false; // A sandboxed frame: no cookies at all.
  }
  return cookieJar()?.split("; ").includes(`${name}=${value}`) ?? false;
}

/** The raw value of the banner's cookie, if the page has one. */
function cookieValue(publicId: string): string | undefined {
  const prefix = `${cookieName(publicId)}=`;
  return cookieJar()
    ?.split("; ")
    .find((part) => part.startsWith(prefix))
    ?.slice(prefix.length);
}

/**
 * JSON text of a state or a row, written here rather than by the page's `JSON.stringify`: a
 * library of the page may have replaced it, or given arrays a `toJSON` (Prototype.js's
 * `Array#toJSON` returns a string), and the cookie and the row would then be garbled. No `toJSON`
 * is read but a Date's (its ISO time, as JSON.stringify writes it); as JSON.stringify, it leaves
 * out fields that are undefined (or functions) and writes them `null` in arrays, and escapes a
 * lone surrogate (which encodeURIComponent, for the cookie, refuses). Undefined for a value JSON
 * has no text for.
 */
export function toJson(value: unknown): string | undefined {
  if (typeof value === "string") {
    // Quotes, backslashes, control characters (all below the space) and lone surrogates as \u
    // escapes; a surrogate pair (matched first) is kept.
    const escaped = (c: string) =>
      c.length === 2 ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
    return `"${value.replace(/[\ud800-\udbff][\udc00-\udfff]|[\\"\ud800-\udfff]|[^ -\uffff]/g, escaped)}"`;
  }
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "null";
  if (typeof value === "boolean" || value === null) return String(value);
  if (value instanceof Date) {
    return Number.isNaN(value.getTime()) ? "null" : toJson(value.toISOString());
  }
  if (typeof value !== "object") return undefined;
  if (Array.isArray(value))
    return `[${Array.from(value, (item) => toJson(item) ?? "null").join()}]`;
  const fields = Object.entries(value).map(([key, item]) => {
    const text = toJson(item);
    return text === undefined ? "" : `${toJson(key)}:${text}`;
  });
  return `{${fields.filter(Boolean).join()}}`;
}

/** The state in the banner's cookie, or null when there is none or it is unreadable. */
export function readState(publicId: string): ConsentState | null {
  const value = cookieValue(publicId);
  if (value === undefined) return null;
  try {
    const state: unknown = JSON.parse(decodeURIComponent(value));
    return isConsentState(state) ? state : null;
  } catch {
    return null; // A damaged cookie counts as no choice: the banner asks again.
  }
}

/**
 * Stores the state in a first-party cookie (Secure on https, SameSite=Lax). Returns whether the
 * browser kept it: one that does not fit a cookie (about 4 KB, many long category names) is
 * dropped, and the cookie holds what it held before.
 */
export function writeState(publicId: string, state: ConsentState): boolean {
  return setCookie(
    cookieName(publicId),
    encodeURIComponent(toJson(state) as string),
    MAX_AGE_SECONDS,
  );
}

/** Removes the banner's cookie (an erasure: the device forgets its state). */
export function forgetState(publicId: string): void {
  setCookie(cookieName(publicId), "", 0);
}

/** A random (version 4) UUID; crypto.randomUUID needs a secure context, this does not. */
export function randomUuid(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
