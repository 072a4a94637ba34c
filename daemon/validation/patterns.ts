/**
 * Patterns the daemon's rules and the banner runtime both check (the runtime bundles this module
 * alone, so it imports nothing).
 */

/** A UUID in its canonical 8-4-4-4-12 hexadecimal form. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
