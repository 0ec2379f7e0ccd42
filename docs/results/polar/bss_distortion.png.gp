set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set output 'docs/results/polar/bss_distortion.png'
set title 'polar codes, source bss, mode sign: distortion against rate'
set xlabel 'rate R (information bits per element)'
set ylabel 'Hamming distortion (sign flips)'
set grid
set key top right
set xrange [0:1]
set yrange [0:*]
plot 'docs/results/polar/bss_distortion.png.dat' index 0 using 1:2 with linespoints title 'N = 256', 'docs/results/polar/bss_distortion.png.dat' index 1 using 1:2 with linespoints title 'N = 512', 'docs/results/polar/bss_distortion.png.dat' index 2 using 1:2 with linespoints title 'N = 1024', 'docs/results/polar/bss_distortion.png.dat' index 3 using 1:2 with linespoints title 'N = 2048', 'docs/results/polar/bss_distortion.png.dat' index 0 using 1:4 with lines dashtype 2 lw 2 title 'bound h^-1(1-R)'
