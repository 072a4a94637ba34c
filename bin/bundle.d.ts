/** bin/bundle.js: runs a TypeScript entry point from its esbuild bundle (see there). */
export function loadBundled(
  entry: string,
  name: string,
  options?: { root?: string; keepNames?: boolean },
): Promise<Record<string, unknown> | undefined>;
