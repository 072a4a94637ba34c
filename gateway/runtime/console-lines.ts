/**
 * The runtime's console lines, for the site owner. Each names its banner the same way,
 * `consent banner <publicId>: …`, so a page with more than one loader on it (the tag pasted
 * twice, a tag manager's copy, another banner's) tells whose line it is, and one search of the
 * console finds them all.
 */
const line = (publicId: string, message: string) => `consent banner ${publicId}: ${message}`;

/** Something the site owner should change; the banner goes on. */
export function warn(publicId: string, message: string): void {
  console.warn(line(publicId, message));
}

/** The page's own code failed the runtime; the error goes along for its stack. */
export function fail(publicId: string, message: string, error: unknown): void {
  console.error(line(publicId, message), error);
}
