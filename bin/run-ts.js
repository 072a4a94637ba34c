// Runs a TypeScript entry point of this package through tsx, so the bins work straight from a
// clone after `npm install` with no build step.
import { register } from "tsx/esm/api";

register();

export function run(entry) {
  return import(new URL(entry, import.meta.url).href);
}
