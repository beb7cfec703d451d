benchmark = False
