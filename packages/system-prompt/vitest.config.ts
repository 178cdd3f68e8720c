import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/system-prompt',
    include: ['tests/**/*.test.ts'],
  },
})
