import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/compaction',
    include: ['tests/**/*.test.ts'],
  },
})
