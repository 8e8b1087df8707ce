from cs_audit.cli import main

main()
