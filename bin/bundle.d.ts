/** bin/bundle.js: runs a TypeScript entry point from its esbuild bundle (see there). */
export function loadBundled(
  entry: string,
  name: string,
  root?: string,
): Promise<Record<string, unknown> | undefined>;
