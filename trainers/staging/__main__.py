import sys

from trainers.staging.stage import main

sys.exit(main())
