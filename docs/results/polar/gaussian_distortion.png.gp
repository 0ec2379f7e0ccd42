set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set output 'docs/results/polar/gaussian_distortion.png'
set title 'polar codes, source gaussian, mode soft: distortion against rate'
set xlabel 'rate R (information bits per element)'
set ylabel 'normalized squared error'
set grid
set key top right
set xrange [0:1]
set yrange [0:*]
plot 'docs/results/polar/gaussian_distortion.png.dat' index 0 using 1:2 with linespoints title 'N = 1024', 'docs/results/polar/gaussian_distortion.png.dat' index 1 using 1:2 with linespoints title 'N = 16384', 'docs/results/polar/gaussian_distortion.png.dat' index 0 using 1:4 with lines dashtype 2 lw 2 title 'bound of +-alpha codes'
