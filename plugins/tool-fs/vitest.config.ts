import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/tool-fs',
    include: ['tests/**/*.test.ts'],
  },
})
