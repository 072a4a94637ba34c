import { Text } from "ink";
import { createContext, type ReactNode, useContext } from "react";

/** Whether colours and emphasis are on (decided by terminal.ts colorEnabled). */
const ColorContext = createContext(false);

/** Provides the colour decision to every view below it. */
export function ColorProvider({ color, children }: { color: boolean; children: ReactNode }) {
  return <ColorContext.Provider value={color}>{children}</ColorContext.Provider>;
}

/** What a piece of text means, so every view colours the same thing the same way. */
export type Tone = "success" | "failure" | "warning" | "muted" | "accent" | "strong";

const TONES: Record<Tone, { color?: string; bold?: boolean; dimColor?: boolean }> = {
  success: { color: "green" },
  failure: { color: "red", bold: true },
  warning: { color: "yellow", bold: true },
  muted: { dimColor: true },
  accent: { color: "cyan" },
  strong: { bold: true },
};

export interface TonedProps {
  tone?: Tone;
  children: ReactNode;
  wrap?: "wrap" | "truncate-end";
}

/** Text in a tone when colours are on, plain otherwise. */
export function Toned({ tone, children, wrap }: TonedProps) {
  const color = useContext(ColorContext);
  const style = color && tone ? TONES[tone] : {};
  return (
    <Text {...style} wrap={wrap}>
      {children}
    </Text>
  );
}
