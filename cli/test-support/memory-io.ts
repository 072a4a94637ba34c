import { Writable } from "node:stream";
import type { Io } from "#cli/output.js";

/** A piped (non-TTY) stream that keeps what was written, for in-process runs of main(). */
export class MemoryStream extends Writable {
  text = "";
  readonly isTTY = false;
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** Io over memory streams, with a clean environment. */
export function memoryIo(
  env: NodeJS.ProcessEnv = {},
): Io & { stdout: MemoryStream; stderr: MemoryStream } {
  return {
    stdout: new MemoryStream() as MemoryStream & NodeJS.WriteStream,
    stderr: new MemoryStream() as MemoryStream & NodeJS.WriteStream,
    env,
  } as never;
}
