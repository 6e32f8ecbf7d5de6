export const FAR: number;
export const DEAD: number;
export const MONTH: number;
export function options(
  dir: string,
  snapshotBytes: number,
): { dir: string; segmentBytes: number; checkpointIntervalMs: number; snapshotBytes: number };
export function farPayload(i: number): { i: number; text: string; h: string };
export function deadPayload(i: number): { dead: number; pad: string };
export const IDLE: number;
export function idlePayload(i: number): { idle: number; pad: string };
