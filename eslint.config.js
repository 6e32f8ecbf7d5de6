import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/*
 * The layers of src/ (docs/architecture.md): a folder imports only from the ones below it.
 * Each entry: the files, and the imports they may not make (as they are written: relative
 * paths ending in .js). Within src/queue, the shared domain imports none of the embedded
 * engine's files, and no backend leans on another's.
 */
const above = (...folders) =>
  folders.map((folder) => (folder === 'delay-queue' ? '**/delay-queue.js' : `**/${folder}/**`));
const EMBEDDED = [
  'engine',
  'near',
  'horizon',
  'deliveries',
  'producer',
  'parts',
  'ready-list',
  'waiters',
  'receipts',
  'finished',
  'decode-ahead',
  'locks',
  'due-heap',
  'insights',
];
const embedded = (prefix) => EMBEDDED.map((name) => `${prefix}${name}.js`);
/** The folders from the bottom up: each of the first seven imports none of those after it. */
const STACK = [
  'wheel',
  'clock',
  'timer',
  'patterns',
  'protocol',
  'queue',
  'store',
  'partitioned',
  'postgres',
  'valkey',
  'cluster',
  'server',
  'client',
  'cli',
  'idempotent',
  'delay-queue',
];
const after = (folder) => STACK.slice(STACK.indexOf(folder) + 1);
const LAYERS = [
  ...['wheel', 'clock', 'timer', 'patterns', 'protocol', 'queue', 'store'].map((folder) => [
    `src/${folder}/**`,
    above(...after(folder)),
  ]),
  // The partitioned engine, over any PartitionDriver: no store, no Valkey, no embedded engine.
  ['src/partitioned/**', [...above(...after('partitioned'), 'store'), ...embedded('**/queue/')]],
  // The PostgreSQL store of the partitioned engine: the driver contract and the queue's domain.
  ['src/postgres/**', [...above(...after('postgres'), 'store'), ...embedded('**/queue/')]],
  // The connection to Valkey/Redis, shared by the cluster and the Redis idempotency store.
  ['src/valkey/**', above(...after('timer').filter((folder) => folder !== 'valkey'))],
  [
    'src/cluster/**',
    [...above('store', 'server', 'client', 'cli', 'delay-queue'), ...embedded('**/queue/')],
  ],
  [
    'src/idempotent/**',
    above('queue', 'store', 'cluster', 'server', 'client', 'cli', 'delay-queue'),
  ],
  ['src/server/**', above('client', 'cli')],
  [
    'src/client/**',
    [
      ...above('server', 'cli', 'store', 'valkey', 'cluster', 'delay-queue'),
      ...embedded('**/queue/'),
    ],
  ],
];
const DOMAIN = [
  'api',
  'backend',
  'checked-queue',
  'counters',
  'events',
  'index',
  'message',
  'options',
  'push',
  'push-guard',
  'push-sender',
  'recurring',
  'recurring-records',
  'recurring-spec',
  'store',
  'topics',
  'tracing',
  'turns',
  'types',
  'worker',
].map((name) => `src/queue/${name}.ts`);
const layerRules = [
  ...LAYERS.map(([files, group]) => ({
    files: [files],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group, message: 'layers only point down (docs/architecture.md)' }] },
      ],
    },
  })),
  {
    files: DOMAIN,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [...above(...after('queue')), ...embedded('./')],
              message: 'the shared domain knows no backend (docs/architecture.md)',
            },
          ],
        },
      ],
    },
  },
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setImmediate: 'readonly',
        clearImmediate: 'readonly',
        performance: 'readonly',
        AbortSignal: 'readonly',
        AbortController: 'readonly',
        DOMException: 'readonly',
        FinalizationRegistry: 'readonly',
        WeakRef: 'readonly',
        globalThis: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  ...layerRules,
);
