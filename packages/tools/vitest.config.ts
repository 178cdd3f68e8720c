import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/tools',
    include: ['tests/**/*.test.ts'],
  },
})
