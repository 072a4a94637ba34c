import { open } from "node:fs/promises";
import { type Command, Option } from "commander";
import { fileFailure } from "#cli/file-errors.js";
import { nonEmpty } from "#cli/option-parsers.js";
import { UserError } from "#cli/problems.js";
import {
  BANNER_BODY_LIMIT,
  LAYOUTS,
  POSITIONS,
  TELEMETRY_LEVELS,
} from "#daemon/banners/banner-store.js";

/** Options shared by `banners create` and `banners update`, as commander parses them. */
export interface BannerFieldOptions {
  name?: string;
  domain?: string;
  layout?: string;
  position?: string;
  primaryColor?: string;
  secondaryColor?: string;
  textColor?: string;
  accentColor?: string;
  telemetryLevel?: string;
  gdpr?: boolean;
  ccpa?: boolean;
  lgpd?: boolean;
  config?: string;
}

/** Flag → field of the configuration object; the daemon validates every value (decisions §3). */
const CONFIGURATION_FLAGS = {
  layout: "layout",
  position: "position",
  primaryColor: "primaryColor",
  secondaryColor: "secondaryColor",
  textColor: "textColor",
  accentColor: "accentColor",
  telemetryLevel: "telemetryLevel",
} as const satisfies Partial<Record<keyof BannerFieldOptions, string>>;

/** Adds the banner field options; for create, name and domain are mandatory. */
export function addBannerFieldOptions(command: Command, mode: "create" | "update"): Command {
  const name = new Option("--name <name>", "banner name, 1-255 characters");
  const domain = new Option(
    "--domain <domain>",
    "site domain, e.g. example.com (stored as https://)",
  );
  if (mode === "create") {
    name.makeOptionMandatory();
    domain.makeOptionMandatory();
  }
  return command
    .addOption(name)
    .addOption(domain)
    .addOption(new Option("--layout <layout>", "how the banner shows").choices(LAYOUTS))
    .addOption(new Option("--position <position>", "where it shows").choices(POSITIONS))
    .option("--primary-color <colour>", "hex, rgb()/rgba()/hsl()/hsla() or a CSS colour name")
    .option("--secondary-color <colour>", "as --primary-color")
    .option("--text-color <colour>", "as --primary-color")
    .option("--accent-color <colour>", "as --primary-color")
    .addOption(
      new Option("--telemetry-level <level>", "what a consent log keeps of the page").choices(
        TELEMETRY_LEVELS,
      ),
    )
    .option("--gdpr", "GDPR compliance on (create default: on)")
    .option("--no-gdpr", "GDPR compliance off")
    .option("--ccpa", "CCPA compliance on (create default: off)")
    .option("--no-ccpa", "CCPA compliance off")
    .option("--lgpd", "LGPD compliance on (create default: off)")
    .option("--no-lgpd", "LGPD compliance off")
    .option(
      "--config <file>",
      "JSON file with a configuration object, every field as docs/banner-configuration.md lists them; flags override its fields",
      nonEmpty("the configuration file"),
    );
}

/**
 * The REST body (spec 4.3, decisions §3) for the options given. It travels in the request's
 * `json` field, so the daemon applies exactly the REST validation and its messages name the
 * offending field, wherever it came from.
 */
export async function bannerBody(
  options: BannerFieldOptions,
  mode: "create" | "update",
): Promise<Record<string, unknown>> {
  const configuration: Record<string, unknown> = options.config
    ? await readConfigurationFile(options.config)
    : {};
  for (const [flag, field] of Object.entries(CONFIGURATION_FLAGS)) {
    const value = options[flag as keyof typeof CONFIGURATION_FLAGS];
    if (value !== undefined) configuration[field] = value;
  }
  const body: Record<string, unknown> = {};
  if (options.name !== undefined) body.name = options.name;
  if (options.domain !== undefined) body.domain = options.domain;
  // spec 4.3: creation requires a configuration object, even an empty one.
  if (mode === "create" || Object.keys(configuration).length > 0)
    body.configuration = configuration;
  if (options.gdpr !== undefined) body.gdprEnabled = options.gdpr;
  if (options.ccpa !== undefined) body.ccpaEnabled = options.ccpa;
  if (options.lgpd !== undefined) body.lgpdEnabled = options.lgpd;
  return body;
}

/** Whether any field option was given (an update with none would change nothing). */
export function hasBannerFields(options: BannerFieldOptions): boolean {
  const fields: (keyof BannerFieldOptions)[] = [
    "name",
    "domain",
    "config",
    "gdpr",
    "ccpa",
    "lgpd",
    ...(Object.keys(CONFIGURATION_FLAGS) as (keyof typeof CONFIGURATION_FLAGS)[]),
  ];
  return fields.some((field) => options[field] !== undefined);
}

/** The body as the bytes of the request's `json` field. */
export function encodeBody(body: Record<string, unknown>): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(body));
}

/**
 * The most of a configuration file read: four times what a banner's body may hold (the daemon
 * judges the configuration's size exactly), so a file that is no configuration (a device, a
 * log) fails at once rather than being read whole into memory.
 */
const CONFIG_FILE_MAX_BYTES = 4 * BANNER_BODY_LIMIT;

/** The file's text, or undefined when it holds more than CONFIG_FILE_MAX_BYTES. */
async function readBounded(file: string): Promise<string | undefined> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(CONFIG_FILE_MAX_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return length > CONFIG_FILE_MAX_BYTES ? undefined : buffer.toString("utf8", 0, length);
  } finally {
    await handle.close();
  }
}

async function readConfigurationFile(file: string): Promise<Record<string, unknown>> {
  let text: string | undefined;
  try {
    text = await readBounded(file);
  } catch (error) {
    const { reason, hint } = fileFailure(
      file,
      error,
      "read",
      "pass the path of a JSON file holding a configuration object",
    );
    throw new UserError(
      `Cannot read the configuration file ${file}: ${reason}.`,
      hint,
      "config_file_unreadable",
    );
  }
  if (text === undefined) {
    throw new UserError(
      `The configuration file ${file} holds more than ${CONFIG_FILE_MAX_BYTES / 1024 / 1024} MiB; a banner's whole body may hold ${BANNER_BODY_LIMIT / 1024} KiB.`,
      "pass the path of a JSON file holding a configuration object",
      "config_file_invalid",
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UserError(
      `The configuration file ${file} is not valid JSON: ${(error as Error).message}.`,
      undefined,
      "config_file_invalid",
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new UserError(
      `The configuration file ${file} must hold a JSON object.`,
      'e.g. { "layout": "modal", "categories": [{ "name": "necessary", "required": true }] }',
      "config_file_invalid",
    );
  }
  return value as Record<string, unknown>;
}
