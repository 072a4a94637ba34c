import { Box, Text } from "ink";
import { loaderSnippet } from "#cli/commands/banner-loader.js";
import { Copyable } from "#cli/components/copyable.js";
import { type Field, KeyValue } from "#cli/components/key-value.js";
import { Table } from "#cli/components/table.js";
import { formatTime, yesNo } from "#cli/format.js";
import { Toned } from "#cli/theme.js";
import type { Banner } from "#gen/consent/v1/banner_pb.js";

function compliance(banner: Banner): string {
  const flags = banner.compliance;
  const on = flags
    ? [flags.gdpr && "GDPR", flags.ccpa && "CCPA", flags.lgpd && "LGPD"].filter(Boolean)
    : [];
  return on.length > 0 ? on.join(", ") : "none";
}

function configurationFields(banner: Banner): Field[] {
  const c = banner.configuration;
  if (!c) return [];
  const languages = Object.keys(c.texts);
  return [
    { label: "Layout", value: `${c.layout} at ${c.position}` },
    {
      label: "Colours",
      value: `primary ${c.primaryColor}, secondary ${c.secondaryColor}, text ${c.textColor}, accent ${c.accentColor}`,
    },
    {
      label: "Categories",
      value: c.categories
        .map((cat) => (cat.required ? `${cat.name} (required)` : cat.name))
        .join(", "),
    },
    { label: "Languages", value: languages.length > 0 ? languages.join(", ") : "defaults" },
    { label: "Rules", value: String(c.jurisdictionRules.length) },
    { label: "Telemetry", value: c.telemetryLevel },
    ...(c.additionalDomains.length > 0
      ? [{ label: "Also on", value: c.additionalDomains.join(", ") }]
      : []),
  ];
}

function bannerFields(banner: Banner): Field[] {
  return [
    { label: "ID", value: banner.id, copy: true },
    { label: "Public ID", value: banner.publicId, copy: true },
    { label: "Name", value: banner.name },
    { label: "Domain", value: banner.domain, copy: true },
    {
      label: "Active",
      value: yesNo(banner.isActive),
      tone: banner.isActive ? "success" : "warning",
    },
    {
      label: "Revision",
      value: `${banner.revision}, published ${formatTime(banner.publishedAt)}`,
    },
    {
      label: "Draft",
      value: banner.hasUnpublishedChanges
        ? "has unpublished changes (run `banners publish`)"
        : "same as production",
      tone: banner.hasUnpublishedChanges ? "warning" : undefined,
    },
    { label: "Compliance", value: compliance(banner) },
    ...configurationFields(banner),
    { label: "Created", value: formatTime(banner.createdAt) },
    { label: "Updated", value: formatTime(banner.updatedAt) },
  ];
}

export interface BannerViewProps {
  banner: Banner;
  baseUrl: string;
  /** A line above the banner ("Banner published"). */
  title?: string;
}

/**
 * One banner (draft configuration shown) and the loader snippet to paste into a page: whole on a
 * line of its own, however narrow the terminal (longer than 80 columns with any base URL).
 */
export function BannerView({ banner, baseUrl, title }: BannerViewProps) {
  return (
    <Box flexDirection="column">
      {title ? <Toned tone="success">{title}</Toned> : null}
      <KeyValue fields={bannerFields(banner)} />
      <Box flexDirection="column" marginTop={1}>
        <Text>Loader snippet:</Text>
        <Copyable value={loaderSnippet(banner, baseUrl)} />
      </Box>
    </Box>
  );
}

/** A team's banners, oldest first. */
export function BannersTable({ banners }: { banners: readonly Banner[] }) {
  return (
    <Table
      rows={banners}
      empty="This team has no banners yet. Create one with `consentctl banners create`."
      columns={[
        { header: "ID", value: (b) => b.id, copy: true },
        { header: "PUBLIC ID", value: (b) => b.publicId, copy: true },
        { header: "NAME", value: (b) => b.name, shrinks: true },
        { header: "DOMAIN", value: (b) => b.domain, shrinks: true, copy: true },
        {
          header: "ACTIVE",
          value: (b) => yesNo(b.isActive),
          tone: (b) => (b.isActive ? undefined : "warning"),
        },
        { header: "REV", value: (b) => String(b.revision) },
        { header: "DRAFT", value: (b) => (b.hasUnpublishedChanges ? "changed" : "-") },
      ]}
    />
  );
}

/** What banner commands answer with: the banner and the base URL its loader is served from. */
export interface BannerResult {
  banner: Banner;
  baseUrl: string;
}

export const bannerView =
  (title?: string) =>
  ({ banner, baseUrl }: BannerResult) => (
    <BannerView banner={banner} baseUrl={baseUrl} title={title} />
  );
export const bannersView =
  () =>
  ({ banners }: { banners: readonly Banner[] }) => <BannersTable banners={banners} />;
