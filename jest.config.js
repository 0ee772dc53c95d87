/** Jest in ESM mode (NestJS 12 is ESM-only), TypeScript through ts-jest. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/libs', '<rootDir>/services', '<rootDir>/test', '<rootDir>/cli', '<rootDir>/bench'],
  testMatch: ['**/*.spec.ts'],
  moduleNameMapper: {
    '^#libs/(.*)$': '<rootDir>/libs/$1/src/index.ts',
    '^#proto/(.*)\\.js$': '<rootDir>/proto/$1.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: { ignoreCodes: [151002] } }],
  },
  testTimeout: 60000,
};
