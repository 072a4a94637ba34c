import { Box } from "ink";
import { KeyValue } from "#cli/components/key-value.js";
import { Table } from "#cli/components/table.js";
import { formatTime, yesNo } from "#cli/format.js";
import { Toned } from "#cli/theme.js";
import type { Team } from "#gen/consent/v1/admin_pb.js";

/** A team's fields as shown by create, show and set-plan. */
export function TeamView({ team, title }: { team: Team; title?: string }) {
  return (
    <Box flexDirection="column">
      {title ? <Toned tone="success">{title}</Toned> : null}
      <KeyValue
        fields={[
          { label: "ID", value: team.id, copy: true },
          { label: "Name", value: team.name },
          { label: "Plan", value: team.plan },
          { label: "Cross-device", value: yesNo(team.crossDeviceConsent) },
          { label: "Rate limit", value: `${team.rateLimit} requests per key per 15 min` },
          { label: "Created", value: formatTime(team.createdAt) },
          { label: "Updated", value: formatTime(team.updatedAt) },
        ]}
      />
    </Box>
  );
}

/** Every team, oldest first. */
export function TeamsTable({ teams }: { teams: readonly Team[] }) {
  return (
    <Table
      rows={teams}
      empty="No teams yet. Create one with `consentctl teams create --name NAME --plan PLAN`."
      columns={[
        { header: "ID", value: (t) => t.id, copy: true },
        { header: "NAME", value: (t) => t.name, shrinks: true },
        { header: "PLAN", value: (t) => t.plan },
        { header: "CROSS-DEVICE", value: (t) => yesNo(t.crossDeviceConsent) },
        { header: "CREATED", value: (t) => formatTime(t.createdAt) },
      ]}
    />
  );
}

export const teamView = (title?: string) => (team: Team) => <TeamView team={team} title={title} />;
export const teamsView = () => (teams: readonly Team[]) => <TeamsTable teams={teams} />;
