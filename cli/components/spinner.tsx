import { Text } from "ink";
import { useEffect, useState } from "react";
import { Toned } from "#cli/theme.js";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const FRAME_MS = 80;

/**
 * Shows that consentctl is waiting on the daemon. Rendered only on a terminal (the lifecycle root
 * never mounts it for piped output), so it is a few lines rather than a dependency.
 */
export function Spinner({ label }: { label: string }) {
  const [frame, setFrame] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setFrame((n) => (n + 1) % FRAMES.length), FRAME_MS);
    return () => clearInterval(timer);
  }, []);
  return (
    <Text>
      <Toned tone="accent">{FRAMES[frame]}</Toned> {label}
    </Text>
  );
}
