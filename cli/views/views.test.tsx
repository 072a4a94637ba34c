import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { render } from "ink-testing-library";
import { describe, expect, it } from "vitest";
import { BannerView } from "#cli/views/banner-views.js";
import { keyStatus, MintedKeyView } from "#cli/views/key-views.js";
import { ApiKeySchema } from "#gen/consent/v1/admin_pb.js";
import { BannerSchema } from "#gen/consent/v1/banner_pb.js";

const HOUR = 3600_000;
const at = (ms: number) => timestampFromDate(new Date(ms));

describe("keyStatus", () => {
  const now = new Date("2026-06-01T00:00:00Z");
  const key = (fields: Parameters<typeof create<typeof ApiKeySchema>>[1]) =>
    create(ApiKeySchema, fields);

  it("reads revoked before expired before active", () => {
    expect(keyStatus(key({}), now).label).toBe("active");
    expect(keyStatus(key({ expiresAt: at(now.getTime() + HOUR) }), now).label).toBe("active");
    expect(keyStatus(key({ expiresAt: at(now.getTime() - HOUR) }), now).label).toBe("expired");
    expect(
      keyStatus(
        key({ expiresAt: at(now.getTime() - HOUR), revokedAt: at(now.getTime() - 2 * HOUR) }),
        now,
      ).label,
    ).toBe("revoked");
  });
});

describe("MintedKeyView", () => {
  it("shows the secret once and what became of the rotated key", () => {
    const previous = create(ApiKeySchema, {
      id: "old-id",
      hint: "ck_live_…a1B2",
      expiresAt: at(Date.now() + 24 * HOUR),
    });
    const minted = {
      apiKey: create(ApiKeySchema, { id: "new-id", scopes: ["banners:read"] }),
      secret: "ck_live_SECRET",
      previous,
    };
    const frame = render(<MintedKeyView minted={minted} />).lastFrame() ?? "";
    expect(frame.match(/ck_live_SECRET/g)).toHaveLength(1);
    expect(frame).toContain("It will not be shown again");
    expect(frame).toMatch(/The previous key ck_live_…a1B2 \(old-id\) keeps working until \d{4}-/);
  });
});

describe("BannerView", () => {
  it("prints the loader snippet whole, on its own line", () => {
    const banner = create(BannerSchema, {
      id: "b-1",
      publicId: "5a147607-8673-4f5b-8305-71ebc1b37e18",
      name: "Main",
      domain: "https://example.com",
      isActive: true,
      revision: 2,
      hasUnpublishedChanges: true,
      compliance: { gdpr: true, ccpa: false, lgpd: true },
    });
    const frame =
      render(<BannerView banner={banner} baseUrl="http://localhost:8080" />).lastFrame() ?? "";
    expect(frame.split("\n")).toContain(
      '<script src="http://localhost:8080/loader/5a147607-8673-4f5b-8305-71ebc1b37e18.js"></script>',
    );
    expect(frame).toContain("GDPR, LGPD");
    expect(frame).toContain("has unpublished changes");
  });
});
