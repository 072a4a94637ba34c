import { Box, Text } from "ink";
import { CopyableAfter } from "#cli/components/copyable.js";
import { type Field, KeyValue } from "#cli/components/key-value.js";
import { SecretNotice } from "#cli/components/secret-notice.js";
import { type Column, Table } from "#cli/components/table.js";
import { counted, formatTime } from "#cli/format.js";
import { type Tone, Toned } from "#cli/theme.js";
import type { Delivery, TestWebhookResponse, Webhook } from "#gen/consent/v1/webhook_pb.js";

/** One page of `webhooks deliveries`. */
export interface DeliveryPage {
  deliveries: Delivery[];
  nextPageToken: string;
}

export interface ReplayResult {
  replayed: number;
}

/** An endpoint's state: enabled, or disabled with the daemon's reason (410 Gone, 5 days failing). */
export function webhookState(webhook: Webhook): { label: string; tone: Tone } {
  if (webhook.enabled) {
    return webhook.failingSince
      ? { label: `enabled, failing since ${formatTime(webhook.failingSince)}`, tone: "warning" }
      : { label: "enabled", tone: "success" };
  }
  const reason = webhook.disabledReason || "disabled";
  return { label: `disabled: ${reason}`, tone: "failure" };
}

function webhookFields(webhook: Webhook): Field[] {
  const state = webhookState(webhook);
  return [
    { label: "ID", value: webhook.id, copy: true },
    { label: "URL", value: webhook.url, copy: true },
    { label: "Events", value: webhook.eventTypes.join(", ") },
    { label: "Banners", value: webhook.bannerIds.length ? webhook.bannerIds.join(", ") : "all" },
    { label: "Description", value: webhook.description || "-" },
    { label: "State", value: state.label, tone: state.tone },
    ...(webhook.disabledAt ? [{ label: "Disabled", value: formatTime(webhook.disabledAt) }] : []),
    { label: "Created", value: formatTime(webhook.createdAt) },
    { label: "Updated", value: formatTime(webhook.updatedAt) },
    ...(webhook.previousSecretExpiresAt
      ? [{ label: "Old secret until", value: formatTime(webhook.previousSecretExpiresAt) }]
      : []),
  ];
}

/** An endpoint; its secret first, once, when the command created or rotated it. */
export function WebhookView({ webhook, title }: { webhook: Webhook; title?: string }) {
  return (
    <Box flexDirection="column">
      {webhook.secret ? (
        <SecretNotice
          label="Signing secret"
          secret={webhook.secret}
          kept="the daemon keeps it sealed, to sign deliveries"
          note="Verify deliveries with any Standard Webhooks library and this secret."
        />
      ) : null}
      {title ? <Toned tone="success">✓ {title}</Toned> : null}
      <KeyValue fields={webhookFields(webhook)} />
    </Box>
  );
}

/**
 * An endpoint's state as a table shows it: a short value of a fixed form (`enabled`,
 * `failing since T`, `disabled`), never cut; a disabled endpoint's reason, free text of the
 * daemon's (up to `every attempt failed for 5 days (since …)`), goes in a column of its own that
 * may be cut, as a name is. Its tone is webhookState's.
 */
function listedState(webhook: Webhook): string {
  if (!webhook.enabled) return "disabled";
  return webhook.failingSince ? `failing since ${formatTime(webhook.failingSince)}` : "enabled";
}

/**
 * A team's endpoints, oldest first. The REASON column is there only when an endpoint is
 * disabled, so a list of enabled endpoints is a table on 81 columns (cli/README.md, "Table
 * widths").
 */
export function WebhooksTable({ webhooks }: { webhooks: readonly Webhook[] }) {
  const reason: Column<Webhook> = {
    header: "REASON",
    value: (w) => (w.enabled ? "-" : w.disabledReason || "-"),
    shrinks: true,
  };
  return (
    <Table
      rows={webhooks}
      empty="This team has no webhook endpoints yet."
      columns={[
        { header: "ID", value: (w) => w.id, copy: true },
        { header: "STATE", value: listedState, tone: (w) => webhookState(w).tone },
        ...(webhooks.some((w) => !w.enabled) ? [reason] : []),
        { header: "EVENTS", value: (w) => w.eventTypes.join(","), shrinks: true },
        {
          header: "BANNERS",
          value: (w) => (w.bannerIds.length ? w.bannerIds.join(",") : "all"),
          shrinks: true,
        },
        { header: "URL", value: (w) => w.url, shrinks: true, copy: true },
      ]}
    />
  );
}

const STATUS_TONES: Record<string, Tone> = {
  succeeded: "success",
  failed: "failure",
  pending: "warning",
};

/** An endpoint's deliveries, newest first, and the token of the next page. */
export function DeliveriesTable({ page }: { page: DeliveryPage }) {
  return (
    <Box flexDirection="column">
      <Table
        rows={page.deliveries}
        empty="No deliveries match."
        columns={[
          { header: "ID", value: (d) => d.id, copy: true },
          { header: "STATUS", value: (d) => d.status, tone: (d) => STATUS_TONES[d.status] },
          { header: "TRIES", value: (d) => String(d.attempts) },
          { header: "CREATED", value: (d) => formatTime(d.createdAt) },
          { header: "LAST", value: (d) => formatTime(d.lastAttemptAt) },
          { header: "HTTP", value: (d) => (d.lastStatusCode ? String(d.lastStatusCode) : "-") },
          { header: "NEXT", value: (d) => formatTime(d.nextAttemptAt) },
          { header: "ERROR", value: (d) => d.lastError || "-", shrinks: true },
        ]}
      />
      {page.nextPageToken ? (
        <CopyableAfter
          tone="muted"
          text="more deliveries: add --page-token"
          value={page.nextPageToken}
        />
      ) : null}
    </Box>
  );
}

/** The one attempt `webhooks test` made. */
export function TestResultView({ result }: { result: TestWebhookResponse }) {
  return (
    <Box flexDirection="column">
      {result.success ? (
        <Toned tone="success">✓ The endpoint accepted the test event.</Toned>
      ) : (
        <Toned tone="failure">✗ The test event was not accepted.</Toned>
      )}
      <KeyValue
        fields={[
          { label: "webhook-id", value: result.eventId, copy: true },
          { label: "HTTP status", value: result.statusCode ? String(result.statusCode) : "-" },
          ...(result.error
            ? [{ label: "Error", value: result.error, tone: "failure" as const }]
            : []),
          ...(result.responseExcerpt ? [{ label: "Response", value: result.responseExcerpt }] : []),
        ]}
      />
    </Box>
  );
}

export const webhookView = (title?: string) => (webhook: Webhook) => (
  <WebhookView webhook={webhook} title={title} />
);
export const webhooksView = () => (webhooks: readonly Webhook[]) => (
  <WebhooksTable webhooks={webhooks} />
);
export const deliveriesView = () => (page: DeliveryPage) => <DeliveriesTable page={page} />;
export const testResultView = () => (result: TestWebhookResponse) => (
  <TestResultView result={result} />
);
export const removedView = () => (result: { id: string }) => (
  <Toned tone="success">✓ Webhook endpoint {result.id} removed.</Toned>
);
export const replayView = () => (result: ReplayResult) => (
  <Text>{counted(result.replayed, "delivery", "deliveries")} scheduled again.</Text>
);
