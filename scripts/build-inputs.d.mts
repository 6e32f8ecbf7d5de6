export type Part = 'tsc' | 'dashboard';
export declare const STAMP: string;
export declare const PARTS: Record<Part, { inputs: string[]; output: string }>;
export declare function inputsHash(root: string, part: Part): string;
export declare function currentHashes(root: string): Record<Part, string>;
export declare function staleParts(root: string, hashes?: Record<Part, string>): Part[];
export declare function writeStamp(root: string, hashes?: Record<Part, string>): void;
