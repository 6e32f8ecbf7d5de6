export declare function seededRandom(seed: number): () => number;
export declare function seededInt(seed: number): (n: number) => number;
export declare function seededBytes(seed: number, length: number): Buffer;
