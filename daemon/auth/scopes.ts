/** decisions §2: every scope a key may carry. */
export const SCOPES = [
  "banners:read",
  "banners:write",
  "consent:read",
  "consent:write",
  "logs:read",
  "webhooks:read",
  "webhooks:write",
] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** decisions §2: plans that include cross-device consent (the subject endpoints). */
const CROSS_DEVICE_PLANS: ReadonlySet<string> = new Set(["professional", "business", "enterprise"]);

export function planIncludesCrossDevice(plan: string): boolean {
  return CROSS_DEVICE_PLANS.has(plan);
}
