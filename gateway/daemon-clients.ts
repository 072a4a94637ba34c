import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";

/** The daemon's services as the gateway calls them, over whichever transport reaches the daemon. */
export interface DaemonClients {
  banners: Client<typeof BannerService>;
  subjects: Client<typeof SubjectService>;
  consentLog: Client<typeof ConsentLogService>;
  health: Client<typeof Health>;
  webhooks: Client<typeof WebhookService>;
}

export function createDaemonClients(transport: Transport): DaemonClients {
  return {
    banners: createClient(BannerService, transport),
    subjects: createClient(SubjectService, transport),
    consentLog: createClient(ConsentLogService, transport),
    health: createClient(Health, transport),
    webhooks: createClient(WebhookService, transport),
  };
}
