import type { ServiceNames } from "#gen/consent/v1/consent_log_pb.js";

/**
 * spec 2.4 `services` (category name → service names) from the proto map, which wraps each
 * category's names in a message (ServiceNames): what the log route's JSON body, the exports and
 * consentctl's JSON write.
 */
export function servicesOfMessage(services: {
  readonly [name: string]: ServiceNames;
}): Record<string, string[]> {
  return Object.fromEntries(Object.entries(services).map(([name, s]) => [name, s.names]));
}

/** servicesOfMessage's inverse: a row's `services` as the proto map, `{}` when it has none. */
export function serviceNamesMessage(services: Readonly<Record<string, string[]>> | undefined): {
  [name: string]: { names: string[] };
} {
  return Object.fromEntries(
    Object.entries(services ?? {}).map(([name, names]) => [name, { names }]),
  );
}
